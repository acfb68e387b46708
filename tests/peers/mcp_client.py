"""Drives the InstantStart MCP endpoint with the official MCP Python SDK.

Usage: mcp_client.py URL SCENARIO  — prints one JSON object with what the scenario saw.
  basic      list tools; call a read tool; a mutating tool followed to a terminal state with
             operation_get(wait_seconds); a validation error.
  rehearsal  the create-cluster-pipeline skill, step by step, through MCP only; a failed stage
             is retried with the tool the failure names.
"""
import asyncio
import json
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
    return {"steps": steps}


async def main():
    url, scenario = sys.argv[1], sys.argv[2]
    async with Client(url) as client:
        result = await {"basic": basic, "rehearsal": rehearsal}[scenario](client)
    print(json.dumps(result))


asyncio.run(main())
