"""Validates Workspace manifests against the HyperPod CLI's space model (PyPI
hyperpod-space-template, `SpaceConfig` v1.1, what `hyp create space` builds a Workspace from): each
manifest is read back into the model's flat fields (unknown fields are refused by the model), and
the model's own `to_domain()` must rebuild the same spec and Kueue labels. jupyter-k8s's sample
must pass too, and the check proves it can fail.

usage: hyperpod_space_models.py <manifests.json>   (a JSON list of Workspace objects)
"""
import glob
import json
import os
import sys

import yaml
from hyperpod_space_template.v1_1.model import SpaceConfig

# Workspace spec key -> SpaceConfig field (nested values keep their camelCase aliases).
FIELDS = {
    "displayName": "display_name", "image": "image", "desiredStatus": "desired_status",
    "ownershipType": "ownership_type", "resources": "resources", "storage": "storage",
    "volumes": "volumes", "containerConfig": "container_config", "nodeSelector": "node_selector",
    "affinity": "affinity", "tolerations": "tolerations", "lifecycle": "lifecycle",
    "templateRef": "template_ref", "idleShutdown": "idle_shutdown", "appType": "app_type",
    "serviceAccountName": "service_account_name", "accessType": "access_type", "env": "env",
    "accessStrategy": "access_strategy", "podSecurityContext": "pod_security_context",
    "containerSecurityContext": "container_security_context", "initContainers": "init_containers",
}
QUEUE, PRIORITY = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"


def errors(ws, exact=True):
    spec, meta = ws.get("spec", {}), ws.get("metadata", {})
    unknown = sorted(set(spec) - set(FIELDS))
    if unknown:
        return [f"spec keys the model does not have: {unknown}"]
    flat = {FIELDS[k]: v for k, v in spec.items()}
    flat["name"] = meta.get("name")
    flat["namespace"] = meta.get("namespace", "default")
    labels = meta.get("labels") or {}
    if QUEUE in labels:
        flat["queue_name"] = labels[QUEUE]
    if PRIORITY in labels:
        flat["priority"] = labels[PRIORITY]
    try:
        config = SpaceConfig.model_validate(flat)
    except Exception as e:  # pydantic.ValidationError
        return [str(e)]
    rebuilt = config.to_domain()["space_spec"]
    problems = []
    if not exact:
        # A sample leaves fields to the model's defaults: that it validates is the check.
        return problems
    if rebuilt["spec"] != spec:
        problems.append(f"the model rebuilds another spec: {rebuilt['spec']} != {spec}")
    for k, v in (rebuilt["metadata"].get("labels") or {}).items():
        if labels.get(k) != v:
            problems.append(f"label {k}: {labels.get(k)} != {v}")
    return problems


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    crds = os.environ.get("INSTANTSTART_CRDS_DIR", os.path.join(here, "..", "fixtures", "crds"))
    examples = sorted(glob.glob(os.path.join(crds, "examples", "jupyter-k8s_*.yaml")))
    assert examples, "jupyter-k8s's samples are vendored"
    for path in examples:
        ws = yaml.safe_load(open(path))
        assert not errors(ws, exact=False), f"the sample {path} fails the model: {errors(ws, exact=False)}"
    bad = {"metadata": {"name": "x"}, "spec": {"displayName": "x",
           "idleShutdown": {"enabled": True, "idleTimeoutInMinutes": 0}}}
    assert errors(bad), "an idle timeout of 0 and no detection must fail"
    assert errors({"metadata": {"name": "x"}, "spec": {"displayName": "x", "bogus": 1}})
    failures = []
    items = json.load(open(sys.argv[1]))
    for item in items:
        assert item["apiVersion"] == "workspace.jupyter.org/v1alpha1", item["apiVersion"]
        problems = errors(item)
        if problems:
            failures.append((item["metadata"]["name"], problems))
    for name, problems in failures:
        print(f"FAIL {name}: {problems}")
    print(f"checked {len(items)} spaces against the CLI's model ({len(examples)} jupyter-k8s samples)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
