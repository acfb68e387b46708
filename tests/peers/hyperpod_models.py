"""Validates HyperPodPyTorchJob manifests against AWS's HyperPod SDK models (PyPI
sagemaker-hyperpod), by field name: the models declare snake_case aliases, and validating by
alias would ignore every camelCase field. Also holds the manifests to the shape of AWS's example
jobs (tests/fixtures/crds/examples), and proves the check can fail.

usage: hyperpod_models.py <manifests.json>   (a JSON list of HyperPodPyTorchJob objects)
"""
import glob
import json
import os
import sys

import importlib.metadata
import importlib.util

import yaml


def sdk_model():
    """The SDK's job model, loaded from its own file: the package (installed without its large
    dependency set) is never imported as a whole."""
    for f in importlib.metadata.files("sagemaker-hyperpod"):
        if str(f).endswith("training/config/hyperpod_pytorch_job_unified_config.py"):
            spec = importlib.util.spec_from_file_location("hp_job_config", f.locate())
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module._HyperPodPytorchJob
    raise SystemExit("sagemaker-hyperpod is not installed (./scripts/test installs it)")


_HyperPodPytorchJob = sdk_model()


def errors(spec):
    try:
        _HyperPodPytorchJob.model_validate(spec, by_alias=False, by_name=True)
        return []
    except Exception as e:  # pydantic.ValidationError
        return [str(e)]


def strict_top_level(job):
    """The top-level model ignores unknown keys: hold those to what AWS's examples use."""
    allowed = {"nprocPerNode", "replicaSpecs", "runPolicy", "elasticPolicy"}
    extra = set(job["spec"]) - allowed
    return [f"unknown spec keys {sorted(extra)}"] if extra else []


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    crds = os.environ.get("INSTANTSTART_CRDS_DIR", os.path.join(here, "..", "fixtures", "crds"))
    examples = sorted(glob.glob(os.path.join(crds, "examples", "hyperpodpytorchjob_*.yaml")))
    example_keys = set()
    for path in examples:
        job = yaml.safe_load(open(path))
        assert not errors(job["spec"]), f"AWS's example {path} fails the model: {errors(job['spec'])}"
        example_keys |= set(job["spec"])
    # The check is live: a wrong type and an unknown nested field are both caught.
    bad = {"nprocPerNode": "1", "replicaSpecs": [{"name": "p", "replicas": 1}],
           "runPolicy": {"jobMaxRetryCount": "ten", "bogus": 1}}
    assert len(errors(bad)) == 1 and "bogus" in errors(bad)[0], errors(bad)

    jobs = json.load(open(sys.argv[1]))
    failures = []
    for job in jobs:
        name = job["metadata"]["name"]
        assert job["apiVersion"] == "sagemaker.amazonaws.com/v1", name
        problems = errors(job["spec"]) + strict_top_level(job)
        if examples and not set(job["spec"]) - {"elasticPolicy"} <= example_keys:
            problems.append(f"keys {sorted(job['spec'])} beyond the examples' {sorted(example_keys)}")
        if problems:
            failures.append((name, problems))
    for name, problems in failures:
        print(f"FAIL {name}: {problems}")
    print(f"checked {len(jobs)} jobs against the SDK models ({len(examples)} AWS examples)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
