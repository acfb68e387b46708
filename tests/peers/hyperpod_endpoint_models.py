"""Validates InferenceEndpointConfig and JumpStartModel manifests against AWS's HyperPod SDK
endpoint models (PyPI sagemaker-hyperpod, `_HPEndpoint`, `_HPJumpStartEndpoint`), by field name (the models declare snake_case aliases;
validating by alias would ignore every camelCase field). The top-level model ignores unknown
keys, so those are held to the model's own field names. AWS's example endpoints must pass too,
and the check proves it can fail.

usage: hyperpod_endpoint_models.py <manifests.json>   (a JSON list of InferenceEndpointConfig / JumpStartModel objects)
"""
import glob
import importlib.metadata
import importlib.util
import json
import os
import sys

import yaml


def sdk_model(file, name):
    for f in importlib.metadata.files("sagemaker-hyperpod"):
        if str(f).endswith(f"inference/config/{file}"):
            spec = importlib.util.spec_from_file_location(file[:-3], f.locate())
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return getattr(module, name)
    raise SystemExit("sagemaker-hyperpod is not installed (./scripts/test installs it)")


MODELS = {
    "InferenceEndpointConfig": sdk_model("hp_endpoint_config.py", "_HPEndpoint"),
    "JumpStartModel": sdk_model("hp_jumpstart_endpoint_config.py", "_HPJumpStartEndpoint"),
}


def errors(spec, kind="InferenceEndpointConfig"):
    model = MODELS[kind]
    fields = set(model.model_fields)
    problems = [f"unknown spec keys {sorted(set(spec) - fields)}"] if set(spec) - fields else []
    try:
        model.model_validate(spec, by_alias=False, by_name=True)
    except Exception as e:  # pydantic.ValidationError
        problems.append(str(e))
    return problems


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    crds = os.environ.get("INSTANTSTART_CRDS_DIR", os.path.join(here, "..", "fixtures", "crds"))
    examples = sorted(glob.glob(os.path.join(crds, "examples", "v1_*.yaml")))
    for path in examples:
        spec = yaml.safe_load(open(path))["spec"]
        assert not errors(spec), f"AWS's example {path} fails the model: {errors(spec)}"
    bad = {"modelName": "m", "worker": {"image": "i", "bogus": 1},
           "modelSourceConfig": {"modelSourceType": "s3"},
           "intelligentRoutingSpec": {"enabled": True, "routingStrategy": "fastest"}}
    assert len(errors(bad)) == 1 and "bogus" in errors(bad)[0] and "fastest" in errors(bad)[0], errors(bad)
    failures = []
    items = json.load(open(sys.argv[1]))
    for item in items:
        assert item["apiVersion"] == "inference.sagemaker.aws.amazon.com/v1", item["apiVersion"]
        problems = errors(item["spec"], item["kind"])
        if problems:
            failures.append((item["metadata"]["name"], problems))
    for name, problems in failures:
        print(f"FAIL {name}: {problems}")
    print(f"checked {len(items)} endpoints against the SDK model ({len(examples)} AWS examples)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
