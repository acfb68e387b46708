"""Drives the InstantStart MCP endpoint with the official MCP Python SDK.

Usage: mcp_client.py URL SCENARIO  — prints one JSON object with what the scenario saw.
  upgrade    the upgrade-cluster skill on cluster `demo`: versions, a preview, the upgrade
             followed to its end, versions again.
  readonly   against a server with the write gate: a read tool answers, a mutating one's
             preview (dryRun) answers its plan, the mutating call itself is
             refused with the writes-disabled problem and is described as such.
  basic      list tools, prompts and resources (the skills); read one of each; call a read tool; a mutating tool followed to a terminal state with
             operation_get(wait_seconds); a validation error.
  rehearsal  the create-cluster-pipeline skill, step by step, through MCP only; a failed stage
             is retried with the tool the failure names.
  sharing    two teams lend, borrow, reclaim and resume through MCP only (Kueue in the sandbox).
  training   the submit-training skill on cluster `demo`: inspect (cluster, groups, recipes,
             features), enable the training operator, submit (a bad path is fixed from the
             problem's field), monitor to a terminal state, read the job's restarts; then
             diagnose-nccl: the job's logs filtered for NCCL errors name the faulted rank.
  diagnose   diagnose-node-health on cluster `demo` (one node failed its deep health check):
             investigate read-only (node_list, node_evidence), then reboot, see it still
             failing, then replace; diagnose-cluster-creation on cluster `broken` (its lifecycle
             script failed): cluster_get, operation_get, cluster_evidence names the stream.
  skills     the skills not rehearsed elsewhere, on cluster `demo`: managed-features (the
             inference operator refused without its prerequisite, then both in one request),
             storage-and-models (claims, objects, a model downloaded once), deploy-model's
             managed path (deploy, smoke-test, scale, delete), add-instance-group (scale with
             only the count, an unchanged scale, a new group after zone, type and preflight).
  person     as the person whose agent token MCP_BEARER holds (people sign in): who the agent
             acts as (session_get), a read, and a write (refused for a read-only token).
  spaces     the development-spaces skill on cluster `demo`: turn the feature and its
             prerequisite on, create a space (a bad GPU count fixed from the problem's field),
             open it, ask for an IDE link (web-ui refused with the fallback named), stop, start.
"""
import asyncio
import json
import os
import sys

from mcp import Client


async def call(client, name, args):
    result = await client.call_tool(name, args)
    return {"is_error": bool(result.is_error), "value": result.structured_content}


async def follow(client, operation_id, limit=60):
    """operation_get with wait_seconds until terminal (bounded), as the skill says."""
    for _ in range(limit):
        r = await call(client, "operation_get", {"id": operation_id, "wait_seconds": 10})
        if r["value"]["state"] in ("succeeded", "failed", "cancelled"):
            return r["value"]
    raise RuntimeError(f"operation {operation_id} never finished")


async def basic(client):
    tools = (await client.list_tools()).tools
    out = {
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "read_only": t.annotations.read_only_hint,
                "destructive": t.annotations.destructive_hint,
                "idempotent": t.annotations.idempotent_hint,
                "properties": sorted(t.input_schema.get("properties", {}).keys()),
            }
            for t in tools
        ]
    }
    prompts = (await client.list_prompts()).prompts
    out["prompts"] = [p.name for p in prompts]
    prompt = await client.get_prompt("deploy-model")
    out["prompt_text"] = prompt.messages[0].content.text
    resources = (await client.list_resources()).resources
    out["resources"] = [str(r.uri) for r in resources]
    read = await client.read_resource("skill://diagnose-nccl")
    out["resource_text"] = read.contents[0].text
    out["instance_types"] = await call(client, "instance_type_list", {"zone": "us-west-2b"})
    zones = await client.call_tool("zone_list", {})
    out["zones_text"] = zones.content[0].text
    started = await call(client, "pipeline_create", {
        "name": "agent", "zone": "us-west-2a", "instanceType": "ml.g5.8xlarge",
        "instanceCount": 2, "capacityType": "on-demand", "idempotency_key": "agent-1",
    })
    out["started"] = started
    out["final"] = await follow(client, started["value"]["operation_id"])
    out["invalid"] = await call(client, "pipeline_create", {
        "name": "Bad_Name", "zone": "us-west-2a", "instanceType": "ml.g5.8xlarge",
        "instanceCount": 1, "capacityType": "spot",
    })
    return out


async def rehearsal(client):
    steps = []
    clusters = await call(client, "cluster_list", {})
    steps.append(("cluster_list", len(clusters["value"]["items"])))
    zones = (await call(client, "zone_list", {}))["value"]["items"]
    zone = zones[0]["name"]
    steps.append(("zone_list", zone))
    types = (await call(client, "instance_type_list", {"zone": zone}))["value"]["instanceTypes"]
    steps.append(("instance_type_list", types))
    started = await call(client, "pipeline_create", {
        "name": "rehearsal", "zone": zone, "instanceType": "ml.g5.8xlarge",
        "instanceCount": 1, "capacityType": "on-demand", "idempotency_key": "rehearsal-1",
    })
    steps.append(("pipeline_create", started["value"]["status_tool"]))
    first = await follow(client, started["value"]["operation_id"])
    steps.append(("operation_get", first["state"], first.get("retry_tool"), first.get("error", {}).get("phase")))
    if first["state"] == "failed":
        retried = await call(client, first["retry_tool"], {"id": first["id"]})
        steps.append((first["retry_tool"], retried["is_error"]))
        second = await follow(client, first["id"])
        steps.append(("operation_get", second["state"]))
    cluster = (await call(client, "cluster_get", {"name": "rehearsal"}))["value"]
    steps.append(("cluster_get", {k: v["state"] for k, v in cluster["stages"].items()}))
    # Then the deploy-model skill: inspect, download, serve, smoke-test.
    models = (await call(client, "model_list", {"name": "rehearsal"}))["value"]["items"]
    steps.append(("model_list", len(models)))
    download = await call(client, "model_download", {"name": "rehearsal", "modelId": "Qwen/Qwen3-0.6B"})
    steps.append(("model_download", (await follow(client, download["value"]["operation_id"]))["state"]))
    deploy = await call(client, "deployment_create", {
        "name": "rehearsal", "deploymentName": "qwen",
        "args": ["--model", "/s3/models/Qwen/Qwen3-0.6B"], "gpus": 1})
    steps.append(("deployment_create", deploy["is_error"], deploy["value"]))
    if not deploy["is_error"]:
        steps.append(("operation_get", (await follow(client, deploy["value"]["operation_id"]))["state"]))
        answer = await call(client, "deployment_invoke", {"name": "rehearsal", "deployment": "qwen", "prompt": "hi"})
        steps.append(("deployment_invoke", answer["value"]["choices"][0]["message"]["content"]))
        # What it costs, and whom: each read samples first, so the second counts the first's gap.
        await call(client, "cluster_costs", {"cluster": "rehearsal", "by": "job"})
        costs = (await call(client, "cluster_costs", {"cluster": "rehearsal", "by": "job"}))["value"]
        held = sum(t["gpuHours"] for t in costs["totals"] if t["key"] == "deployment/qwen" and t["kind"] == "used")
        steps.append(("cluster_costs", held > 0, costs["estimate"]))
    return {"steps": steps}


async def training(client):
    steps = []
    cluster = (await call(client, "cluster_get", {"name": "demo"}))["value"]
    steps.append(("cluster_get", {k: cluster["stages"][k]["state"] for k in ("hyperpod", "storage")}))
    groups = (await call(client, "instance_group_list", {"name": "demo"}))["value"]["items"]
    instance_type = groups[0]["instanceType"]
    steps.append(("instance_group_list", instance_type))
    recipes = (await call(client, "recipe_list", {}))["value"]["items"]
    recipe = next(r for r in recipes if r["name"] == "llama-factory")
    asked = sorted(i["field"] for i in recipe["inputs"] if i["required"])
    steps.append(("recipe_list", asked))
    features = (await call(client, "features_get", {"name": "demo"}))["value"]["features"]
    operator = next(f for f in features if f["key"] == "trainingOperator")
    steps.append(("features_get", operator["enabled"]))
    if not operator["enabled"]:
        enabled = await call(client, "features_update", {"name": "demo", "trainingOperator": True})
        op = enabled["value"]["features"]["trainingOperator"]["operationId"]
        steps.append(("features_update", (await follow(client, op))["state"]))
    job = {"name": "demo", "jobName": "agent-sft", "recipe": "llama-factory",
           "instanceType": instance_type, "nodeCount": 2,
           "model": "/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca",
           "idempotency_key": "agent-sft-1"}
    refused = await call(client, "training_job_submit", job)
    steps.append(("training_job_submit", refused["is_error"], refused["value"].get("field")))
    job["model"] = "/s3/models/Qwen/Qwen3-8B"
    job["idempotency_key"] = "agent-sft-2"
    started = await call(client, "training_job_submit", job)
    steps.append(("training_job_submit", started["is_error"], started["value"].get("status_tool")))
    final = await follow(client, started["value"]["operation_id"])
    steps.append(("operation_get", final["state"]))
    seen = (await call(client, "training_job_get", {"name": "demo", "job": "agent-sft"}))["value"]
    steps.append(("training_job_get", seen["state"], seen["restarts"]["count"], seen["restarts"]["limit"]))
    # Then diagnose-nccl: the faulty pod of the latest restart, and its evidence in the logs.
    faulty = seen["faultyPods"][0]
    logs = await call(client, "workload_logs", {"name": "demo", "kind": "pytorch", "workload": "agent-sft",
                                       "pod": faulty, "grep": "NCCL WARN|Watchdog|NET/OFI"})
    lines = logs["value"]["lines"]
    watchdog = [l for l in lines if "Watchdog caught collective operation timeout" in l]
    steps.append(("workload_logs", logs["is_error"], len(watchdog), watchdog[0].split("]")[0] + "]" if watchdog else None,
                  logs["value"].get("untrusted_content", {}).get("fields")))
    # diagnose-nccl for a job that is slow: each rank's GPU utilization. Without the
    # observability add-on the answer says how to turn it on: a suggestion for the user, never a
    # change made while investigating.
    util = await call(client, "cluster_utilization", {"name": "demo", "by": "pod", "workload": "agent-sft"})
    steps.append(("cluster_utilization", util["is_error"], util["value"]["available"],
                  "observability" in util["value"].get("howToEnable", "")))
    features = (await call(client, "features_get", {"name": "demo"}))["value"]["features"]
    steps.append(("features_get", next(f for f in features if f["key"] == "observability")["enabled"]))
    return {"steps": steps}


async def teams(client):
    """The share-cluster-between-teams skill: look, turn governance on, set the policy, give two
    teams their shares (an over-share refused by field first), then submit-training as a team at
    a priority, a missing team answered with the teams to pick from."""
    steps = []
    view = (await call(client, "team_list", {"name": "demo"}))["value"]
    capacity = view["capacity"][0]
    steps.append(("team_list", view["enabled"], capacity["instanceType"], capacity["instances"]))
    enabled = await call(client, "features_update", {"name": "demo", "taskGovernance": True, "trainingOperator": True})
    for key in ("taskGovernance", "trainingOperator"):
        op = enabled["value"]["features"][key]["operationId"]
        steps.append(("features_update", key, (await follow(client, op))["state"]))
    policy = await call(client, "scheduling_policy_set", {"name": "demo", "priorityClasses": [
        {"name": "inference", "weight": 90}, {"name": "training", "weight": 70}], "fairShare": True})
    steps.append(("scheduling_policy_set", (await follow(client, policy["value"]["operation_id"]))["state"]))
    over = await call(client, "team_create", {"name": "demo", "teamName": "team-a",
        "resources": [{"instanceType": capacity["instanceType"], "count": capacity["instances"] + 1}]})
    steps.append(("team_create", over["is_error"], over["value"].get("field")))
    for team, sharing in (("team-a", "LendAndBorrow"), ("team-b", "DontLend")):
        made = await call(client, "team_create", {"name": "demo", "teamName": team, "sharing": sharing,
            "resources": [{"instanceType": capacity["instanceType"], "count": 1}]})
        steps.append(("team_create", team, (await follow(client, made["value"]["operation_id"]))["state"]))
    view = (await call(client, "team_list", {"name": "demo"}))["value"]
    steps.append(("team_list", [(t["name"], t["queue"]) for t in view["teams"]]))
    job = {"name": "demo", "jobName": "team-sft", "recipe": "llama-factory",
           "instanceType": capacity["instanceType"], "nodeCount": 1,
           "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca"}
    refused = await call(client, "training_job_submit", job)
    steps.append(("training_job_submit", refused["is_error"], refused["value"].get("field"), refused["value"].get("hint")))
    job.update({"team": "team-a", "priority": "training", "idempotency_key": "team-sft-1"})
    started = await call(client, "training_job_submit", job)
    steps.append(("operation_get", (await follow(client, started["value"]["operation_id"]))["state"]))
    seen = (await call(client, "training_job_get", {"name": "demo", "job": "team-sft"}))["value"]
    steps.append(("training_job_get", seen["namespace"], seen["team"], seen["priority"], seen["state"]))
    # Why is it pending: team-a asks for two GPUs, one of which is team-b's (DontLend); then
    # team-b's own job is admitted at once and each team's use reads from the teams view.
    long = {"args": ["--max_steps=10000000"], "idempotency_key": None}
    for name, team, nodes in (("wide-a", "team-a", 2), ("own-b", "team-b", 1)):
        job.update(long, jobName=name, team=team, nodeCount=nodes, idempotency_key=f"{name}-1")
        submitted = await call(client, "training_job_submit", job)
        steps.append(("training_job_submit", name, submitted["is_error"]))
        seen = await until(client, "training_job_get", {"name": "demo", "job": name},
                           # The job's own message follows Kueue's a moment later: wait for
                           # Kueue's reason to reach it (never reached fails the wait).
                           lambda j: j.get("admission", {}).get("state") == "admitted"
                           or (j.get("admission", {}).get("message") is not None
                               and "insufficient unused quota" in (j.get("message") or "")))
        admission = seen["admission"]
        steps.append(("training_job_get", name, admission["state"], admission.get("reason"), admission.get("position"),
                      "insufficient unused quota" in (seen.get("message") or "")))
    view = (await call(client, "team_list", {"name": "demo"}))["value"]
    steps.append(("team_list", [(t["name"], t["usage"]["flavors"][0]["inUse"], t["usage"]["flavors"][0]["lent"],
                                 t["usage"]["pendingWorkloads"]) for t in view["teams"]]))
    return {"steps": steps}


async def sharing(client):
    """Two teams, through MCP only: team-a borrows team-b's idle GPU, team-b takes it back
    (team-a's job is preempted and says by which job), and team-a resumes once team-b's job is
    gone, its preemption counted as a restart; each state read as the agent reads it."""
    steps = []
    enabled = await call(client, "features_update", {"name": "demo", "taskGovernance": True, "trainingOperator": True})
    for key in ("taskGovernance", "trainingOperator"):
        await follow(client, enabled["value"]["features"][key]["operationId"])
    policy = await call(client, "scheduling_policy_set", {"name": "demo", "priorityClasses": [
        {"name": "inference", "weight": 90}, {"name": "training", "weight": 70}]})
    await follow(client, policy["value"]["operation_id"])
    for team, sharing in (("team-a", "LendAndBorrow"), ("team-b", "Lend")):
        body = {"name": "demo", "teamName": team, "sharing": sharing,
                "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]}
        if sharing == "LendAndBorrow":
            body["borrowLimit"] = 100
        made = await call(client, "team_create", body)
        steps.append(("team_create", team, (await follow(client, made["value"]["operation_id"]))["state"]))

    async def usage():
        view = (await call(client, "team_list", {"name": "demo"}))["value"]
        return [(t["name"], t["usage"]["flavors"][0]["inUse"], t["usage"]["flavors"][0]["borrowed"],
                 t["usage"]["flavors"][0]["lent"]) for t in view["teams"]]

    def job(name, team, priority, nodes):
        return {"name": "demo", "jobName": name, "recipe": "llama-factory", "instanceType": "ml.g5.8xlarge",
                "nodeCount": nodes, "model": "/s3/models/Qwen/Qwen3-8B", "dataset": "/s3/datasets/alpaca",
                "team": team, "priority": priority, "args": ["--max_steps=10000000"]}

    a1 = {"name": "demo", "job": "a1"}
    await call(client, "training_job_submit", job("a1", "team-a", "training", 2))
    seen = await until(client, "training_job_get", a1, lambda j: j["state"] == "running")
    steps.append(("borrowing", seen["admission"]["state"], await usage()))
    await call(client, "training_job_submit", job("b1", "team-b", "inference", 1))
    await until(client, "training_job_get", {"name": "demo", "job": "b1"}, lambda j: j["state"] == "running")
    # The job and its Workload are two reads: wait until both say it (its pods are gone too).
    seen = await until(client, "training_job_get", a1,
                       lambda j: j["state"] == "pending" and j.get("admission", {}).get("state") == "preempted")
    admission = seen["admission"]
    steps.append(("reclaimed", seen["state"], admission["reason"], admission.get("preemptedBy"),
                  admission.get("position"), "preempted by Kueue for b1" in (seen.get("message") or ""),
                  await usage()))
    deleted = await call(client, "training_job_delete", {"name": "demo", "job": "b1"})
    steps.append(("training_job_delete", (await follow(client, deleted["value"]["operation_id"]))["state"]))
    seen = await until(client, "training_job_get", a1,
                       lambda j: j["state"] == "running" and j.get("admission", {}).get("state") == "admitted")
    steps.append(("resumed", seen["restarts"]["count"], await usage()))
    return {"steps": steps}


async def spaces(client):
    steps = []
    features = (await call(client, "features_get", {"name": "demo"}))["value"]["features"]
    on = {f["key"]: f["enabled"] for f in features}
    steps.append(("features_get", on["ebsCsi"], on["spaces"]))
    enabled = (await call(client, "features_update", {"name": "demo", "ebsCsi": True, "spaces": True}))["value"]
    steps.append(("features_update", [(await follow(client, enabled["features"][k]["operationId"]))["state"]
                                      for k in ("ebsCsi", "spaces")]))
    instance_type = (await call(client, "instance_group_list", {"name": "demo"}))["value"]["items"][0]["instanceType"]
    space = {"name": "demo", "spaceName": "agent-lab", "instanceType": instance_type, "gpus": 2,
             "idleShutdownMinutes": 1440}
    refused = await call(client, "space_create", space)
    steps.append(("space_create", refused["is_error"], refused["value"].get("field")))
    space["gpus"] = 1
    started = await call(client, "space_create", space)
    steps.append(("space_create", started["is_error"], (await follow(client, started["value"]["operation_id"]))["state"]))
    seen = (await call(client, "space_get", {"name": "demo", "space": "agent-lab"}))["value"]
    steps.append(("space_get", seen["state"], [m["path"] for m in seen["mounts"]]))
    opened = (await call(client, "space_open", {"name": "demo", "space": "agent-lab"}))["value"]
    steps.append(("space_open", opened["url"].split("/?")[0].split(":")[1]))
    link = await call(client, "space_connect", {"name": "demo", "space": "agent-lab", "type": "kiro-remote"})
    steps.append(("space_connect", link["is_error"], link["value"].get("status"),
                  link["value"].get("type", "").rsplit(":", 1)[-1]))
    web = await call(client, "space_connect", {"name": "demo", "space": "agent-lab", "type": "web-ui"})
    steps.append(("space_connect", web["is_error"], web["value"].get("status"), "space_open" in web["value"].get("detail", "")))
    for verb, state in (("stop", "stopped"), ("start", "running")):
        op = (await call(client, f"space_{verb}", {"name": "demo", "space": "agent-lab"}))["value"]
        await follow(client, op["operation_id"])
        seen = (await call(client, "space_get", {"name": "demo", "space": "agent-lab"}))["value"]
        steps.append((f"space_{verb}", seen["state"]))
    return {"steps": steps}


async def diagnose(client):
    steps = []
    health = "sagemaker.amazonaws.com/deep-health-check-status"
    nodes = (await call(client, "node_list", {"name": "demo"}))["value"]["nodes"]
    bad = [n["instanceId"] for n in nodes if (n.get("kubernetes") or {}).get("health", {}).get(health) == "Failed"]
    steps.append(("node_list", len(nodes), len(bad)))
    evidence = (await call(client, "node_evidence", {"name": "demo", "id": bad[0]}))["value"]
    steps.append(("node_evidence", "its deep health check failed" in evidence["findings"],
                  "node_replace" in evidence["hint"], any(s["stream"].startswith("DeepHealthCheckResults/") for s in evidence["logs"])))
    # The user agreed to a reboot: it does not mend failed hardware, the evidence says so again.
    reboot = (await call(client, "node_reboot", {"name": "demo", "id": bad[0]}))["value"]
    steps.append(("node_reboot", (await follow(client, reboot["operation_id"]))["state"]))
    again = (await call(client, "node_evidence", {"name": "demo", "id": bad[0]}))["value"]
    steps.append(("node_evidence", again["kubernetes"]["health"][health]))
    # Then, agreed after hearing that local volumes are lost, the replacement.
    replace = (await call(client, "node_replace", {"name": "demo", "id": bad[0]}))["value"]
    steps.append(("node_replace", (await follow(client, replace["operation_id"]))["state"]))
    nodes = (await call(client, "node_list", {"name": "demo"}))["value"]["nodes"]
    steps.append(("node_list", sorted((n.get("kubernetes") or {}).get("health", {}).get(health) for n in nodes)))
    # diagnose-cluster-creation: the failed stage, its error, and the evidence behind it.
    cluster = (await call(client, "cluster_get", {"name": "broken"}))["value"]
    failed = [k for k, v in cluster["stages"].items() if v["state"] == "failed" and k != "pipeline"]
    steps.append(("cluster_get", failed))
    op = (await call(client, "operation_get", {"id": cluster["stages"][failed[0]]["id"]}))["value"]
    steps.append(("operation_get", op["error"]["code"]))
    evidence = (await call(client, "cluster_evidence", {"name": "broken"}))["value"]
    steps.append(("cluster_evidence", evidence["logs"][0]["stream"] in evidence["failureMessage"],
                  evidence["logs"][0]["lines"][0]["message"], "operation_retry" in evidence["hint"]))
    return {"steps": steps}


async def skills(client):
    steps = []
    # managed-features: inspect, change only what was asked, follow each started field.
    features = (await call(client, "features_get", {"name": "demo"}))["value"]["features"]
    steps.append(("features_get", {f["key"]: f["state"] for f in features}["inferenceOperator"]))
    refused = await call(client, "features_update", {"name": "demo", "inferenceOperator": True})
    steps.append(("features_update", refused["is_error"], refused["value"].get("type", "").rsplit(":", 1)[-1]))
    both = (await call(client, "features_update", {"name": "demo", "fsxCsi": True, "inferenceOperator": True}))["value"]
    ended = []
    for k, v in sorted(both["features"].items()):
        if v.get("operationId"):
            ended.append((k, (await follow(client, v["operationId"]))["state"]))
    steps.append(("features_update", ended))
    # storage-and-models: where data lives, what is there, a model downloaded once.
    cluster = (await call(client, "cluster_get", {"name": "demo"}))["value"]
    steps.append(("cluster_get", cluster["stages"]["storage"]["state"], bool(cluster["resources"].get("bucketName"))))
    claims = (await call(client, "storage_list", {"name": "demo"}))["value"]["items"]
    steps.append(("storage_list", [c["claimName"] for c in claims]))
    listed = (await call(client, "model_list", {"name": "demo"}))["value"]["items"]
    steps.append(("model_list", len(listed)))
    download = (await call(client, "model_download", {"name": "demo", "modelId": "Qwen/Qwen3-0.6B"}))["value"]
    steps.append(("model_download", (await follow(client, download["operation_id"]))["state"]))
    listed = (await call(client, "model_list", {"name": "demo"}))["value"]["items"]
    steps.append(("model_list", [m["modelId"] for m in listed]))
    objects = await call(client, "storage_objects_list", {"name": "demo", "claim": "s3-claim", "prefix": "models/"})
    steps.append(("storage_objects_list", objects["is_error"], "models/Qwen/Qwen3-0.6B/config.json" in objects["value"]["keys"]))
    # deploy-model, managed path: inspect, deploy, smoke-test, scale, delete (user confirmed).
    steps.append(("endpoint_list", len((await call(client, "endpoint_list", {"name": "demo"}))["value"]["items"])))
    deployed = await call(client, "endpoint_deploy", {
        "name": "demo", "endpointName": "agent-qwen", "model": "/s3/models/Qwen/Qwen3-0.6B",
        "instanceType": "ml.g5.8xlarge", "routing": "prefixaware", "kvCache": {"l1": True}})
    steps.append(("endpoint_deploy", deployed["is_error"], (await follow(client, deployed["value"]["operation_id"]))["state"]))
    answer = (await call(client, "endpoint_invoke", {"name": "demo", "endpoint": "agent-qwen", "prompt": "hi"}))
    steps.append(("endpoint_invoke", answer["is_error"]))
    same = (await call(client, "endpoint_update", {"name": "demo", "endpoint": "agent-qwen", "replicas": 1}))["value"]
    steps.append(("endpoint_update", "operation_id" in same))
    gone = (await call(client, "endpoint_delete", {"name": "demo", "endpoint": "agent-qwen"}))["value"]
    steps.append(("endpoint_delete", (await follow(client, gone["operation_id"]))["state"]))
    # add-instance-group: scale with only the count, then a new group after zone, type, preflight.
    groups = (await call(client, "instance_group_list", {"name": "demo"}))["value"]["items"]
    group = groups[0]
    same = (await call(client, "instance_group_update", {"name": "demo", "group": group["name"], "instanceCount": group["targetCount"]}))["value"]
    steps.append(("instance_group_update", same.get("unchanged")))
    scaled = (await call(client, "instance_group_update", {"name": "demo", "group": group["name"], "instanceCount": group["targetCount"] + 1}))["value"]
    steps.append(("instance_group_update", (await follow(client, scaled["operation_id"]))["state"]))
    zone = (await call(client, "zone_list", {}))["value"]["items"][0]["name"]
    types = (await call(client, "instance_type_list", {"zone": zone}))["value"]["instanceTypes"]
    steps.append(("instance_type_list", "ml.g5.8xlarge" in types))
    preflight = await call(client, "preflight_get", {"instanceType": "ml.g5.8xlarge", "count": 1})
    steps.append(("preflight_get", preflight["is_error"]))
    added = await call(client, "instance_group_create", {
        "name": "demo", "instanceGroupName": "more", "instanceType": "ml.g5.8xlarge", "instanceCount": 1,
        "zone": zone, "capacityType": "on-demand"})
    steps.append(("instance_group_create", added["is_error"], (await follow(client, added["value"]["operation_id"]))["state"]))
    groups = (await call(client, "instance_group_list", {"name": "demo"}))["value"]["items"]
    steps.append(("instance_group_list", [(g["name"], g["currentCount"]) for g in groups]))
    return {"steps": steps}


async def until(client, tool, args, ready, limit=600):
    """Calls a read tool until `ready` holds of its answer (an agent watching a page). A job
    just submitted is not found until its operation applies it: that answer is waited out."""
    for _ in range(limit):
        answer = await call(client, tool, args)
        value = answer["value"]
        if not answer["is_error"] and ready(value):
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"{tool} never got there: {value}")


async def readonly(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    return {
        "read": await call(client, "cluster_list", {}),
        "write": await call(client, "pipeline_create", {
            "name": "gated", "zone": "us-west-2a", "instanceType": "ml.g5.8xlarge",
            "instanceCount": 1, "capacityType": "on-demand"}),
        "preview": await call(client, "pipeline_create", {
            "name": "gated", "zone": "us-west-2a", "instanceType": "ml.g5.8xlarge",
            "instanceCount": 1, "capacityType": "on-demand", "dryRun": True}),
        "write_description": tools["pipeline_create"].description,
        "read_description": tools["cluster_list"].description,
    }


async def upgrade(client):
    """The upgrade-cluster skill on cluster `demo`: inspect, preview, upgrade, inspect again."""
    before = (await call(client, "cluster_versions", {"name": "demo"}))["value"]
    choices = {"name": "demo", "kubernetesVersion": before["nextKubernetes"],
               "software": {"batchInstances": 1}, "runningJobs": "restart"}
    plan = await call(client, "cluster_upgrade", {**choices, "dryRun": True})
    started = (await call(client, "cluster_upgrade", choices))["value"]
    ended = await follow(client, started["operation_id"])
    after = (await call(client, "cluster_versions", {"name": "demo"}))["value"]
    return {
        "before": [before["kubernetes"], before["nextKubernetes"]],
        "plan": {"is_error": plan["is_error"], "dryRun": plan["value"].get("dryRun"),
                 "phases": [p["name"] for p in plan["value"]["operations"][0]["phases"]]},
        "ended": [ended["state"], [p["name"] for p in ended["phases"]]],
        "after": [after["kubernetes"], [g["software"]["imageStatus"] for g in after["groups"]]],
    }


async def person(client):
    return {
        "me": await call(client, "session_get", {}),
        "read": await call(client, "cluster_list", {}),
        "write": await call(client, "active_cluster_set", {"name": "demo"}),
    }


async def member(client):
    """A team member's agent (MCP_JOB: a training job of their team, as JSON): it submits the
    job, is refused the same job as team MCP_OTHER_TEAM, lists what it may see, and may not
    grant access."""
    job = json.loads(os.environ["MCP_JOB"])
    elsewhere = {**job, "team": os.environ["MCP_OTHER_TEAM"], "jobName": job["jobName"] + "-b"}
    return {
        "submit": await call(client, "training_job_submit", {"name": "demo", **job}),
        "elsewhere": await call(client, "training_job_submit", {"name": "demo", **elsewhere}),
        "list": await call(client, "training_job_list", {"name": "demo"}),
        "grant": await call(client, "team_access_grant", {"name": "demo", "team": job["team"],
                                                          "principalArn": "arn:aws:iam::123456789012:user/x",
                                                          "access": "edit"}),
    }


async def main():
    url, scenario = sys.argv[1], sys.argv[2]
    server = url
    bearer = os.environ.get("MCP_BEARER")
    if bearer:
        # The agent's credentials go on every request, as Kiro CLI sends a configured header.
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        server = streamable_http_client(
            url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60))
    async with Client(server) as client:
        result = await {"person": person, "member": member, "basic": basic, "rehearsal": rehearsal, "training": training, "spaces": spaces, "skills": skills, "diagnose": diagnose, "teams": teams, "sharing": sharing, "readonly": readonly, "upgrade": upgrade}[scenario](client)
    print(json.dumps(result))


asyncio.run(main())
