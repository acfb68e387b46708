"""The benchmark's fleet section: many clusters watched from one process (see
docs/benchmarks.md). Run through scripts/bench (`--only fleet`)."""

import asyncio
import concurrent.futures
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from bench import SECONDS, aws_peers, free_port, get_json, load, parse_wrk, row, rss_mib, server, stop, wait_http

# wrk's request script for a rotation over several paths (one per cluster): each thread sends
# them in turn, so every cluster gets its share of the load.
ROTATION_LUA = """
local paths = {}
init = function(args) for i, p in ipairs(args) do paths[i] = p end end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[(n % #paths) + 1])
end
"""


# What a browser sends: the UI's status polls are answered gzip-encoded.
GZIP = "Accept-Encoding: gzip, deflate, br"


def load_rotation(addr, paths, connections=20, seconds=None, header=None):
    """wrk over `paths` in turn: (req/s, p50 ms, p99 ms). Every answer must be a 2xx or 3xx."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(ROTATION_LUA)
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{max(1, round(seconds or SECONDS))}s", "--latency",
           "-s", f.name, f"http://{addr}{paths[0]}", *(["-H", header] if header else []), "--", *paths]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    os.unlink(f.name)
    rps, p50, p99, bad = parse_wrk(out)
    assert bad == 0, f"{bad} answers were not 2xx/3xx\n{out}"
    return rps, p50, p99


def cpu_ms(pid):
    """CPU time (user and system) a process has used so far, in milliseconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def synced_caches(base):
    with urllib.request.urlopen(f"{base}/metrics") as r:
        text = r.read().decode()
    return len(re.findall(r'^instantstart_watch_cache_synced\{cluster="[^"]+"\} 1$', text, re.M))


def wait_synced(base, n, timeout=600):
    t = time.time()
    while synced_caches(base) < n:
        if time.time() - t > timeout:
            raise SystemExit(f"only {synced_caches(base)} of {n} watch caches synced")
        time.sleep(0.1)
    return time.time() - t


async def change_latency(base, emu_url, nodes, clusters):
    """For each node: mark it NotReady in the emulator and time until the UI's event stream
    has told it for every cluster (all watch the same emulator). Milliseconds, from just before
    the emulator is asked."""
    import aiohttp
    ws_url = base.replace("http", "ws", 1) + "/api/events"
    lat = []
    async with aiohttp.ClientSession() as s, s.ws_connect(ws_url, protocols=("instantstart.events",)) as ws:
        await ws.receive()  # the operations snapshot
        for node in nodes:
            t0 = time.perf_counter()
            patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                                "message": "bench"}]}}
            async with s.patch(f"{emu_url}/api/v1/nodes/{node}", data=json.dumps(patch),
                               headers={"Content-Type": "application/merge-patch+json"}) as r:
                assert r.status == 200, await r.text()
            told = set()
            while len(told) < clusters:
                msg = await asyncio.wait_for(ws.receive(), 30)
                data = json.loads(msg.data)
                if data.get("type") == "cluster":
                    told |= {e["cluster"] for e in data["events"] if e["object"] == node and e["kind"] == "node-not-ready"}
            lat.append((time.perf_counter() - t0) * 1000)
    return lat


def fleet(clusters=20, nodes=500, pods=10000):
    """A fleet from one process: `clusters` imported clusters, each watching `nodes` nodes and
    `pods` realistic pods (one emulator serves them all: each cluster's cache is the server's
    own, as with separate API servers)."""
    moto, emu, emu_url, env, session, role = aws_peers(nodes, pods, "fleet-eks")
    eks = session.client("eks", endpoint_url=env["AWS_ENDPOINT_URL"])
    sm = session.client("sagemaker", endpoint_url=env["AWS_ENDPOINT_URL"])
    names = [f"fleet-{i:02d}" for i in range(clusters)]
    for name in names:
        eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": ["subnet-1", "subnet-2"]})
        sm.create_cluster(
            ClusterName=f"{name}-hp", Orchestrator={"Eks": {"ClusterArn": f"arn:aws:eks:us-west-2:123456789012:cluster/{name}"}},
            InstanceGroups=[{"InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge", "InstanceCount": nodes,
                             "ThreadsPerCore": 1, "ExecutionRole": role,
                             "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-bench/lifecycle", "OnCreate": "on_create.sh"}}])
    addr_of = lambda port: f"127.0.0.1:{port}"  # noqa: E731
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        p, _ = server(d, port, ("--cloud", "aws"), env)
        base = f"http://{addr_of(port)}"
        time.sleep(0.5)
        idle = rss_mib(p.pid)
        ops = []
        for name in names:
            req = urllib.request.Request(f"{base}/api/clusters/import", method="POST",
                                         data=json.dumps({"eksClusterName": name, "hyperpodClusterName": f"{name}-hp"}).encode(),
                                         headers={"Content-Type": "application/json"})
            ops.append(json.load(urllib.request.urlopen(req))["operationId"])
        for op in ops:
            for _ in range(120):
                state = get_json(f"{base}/api/operations/{op}?wait=20")["state"]
                if state in ("succeeded", "failed", "cancelled"):
                    break
            assert state == "succeeded", (op, state)
        # Each cluster's first read starts its watch (the imports were made after start-up).
        t = time.time()
        def first_read(name):
            try:
                urllib.request.urlopen(f"{base}/api/clusters/{name}/status").read()
            except urllib.error.HTTPError:
                pass  # not synced within the read's wait: the watch goes on filling
        with concurrent.futures.ThreadPoolExecutor(clusters) as pool:
            list(pool.map(first_read, names))
        wait_synced(base, clusters)
        row(f"fleet: watch caches synced, from the first reads ({nodes} nodes / {pods} pods each)",
            time.time() - t, "s")
        time.sleep(1)
        full = rss_mib(p.pid)
        row(f"fleet: resident memory, {clusters} clusters × {nodes} nodes × {pods} pods", full, "MiB", target="≤ 250 MiB")
        row("fleet: memory per cluster (above the idle server)", (full - idle) / clusters, "MiB")
        row("fleet: memory per thousand pods watched", (full - idle) / (clusters * pods / 1000), "MiB")
        paths = [f"/api/clusters/{n}/status" for n in names]
        rps, _, p99 = load_rotation(addr_of(port), paths)
        row(f"fleet: status of each of the {clusters} clusters in turn, 20 connections", rps, "req/s")
        row("fleet: status p99, every cluster", p99, "ms", target="≤ 2 ms")
        rps, _, p99 = load_rotation(addr_of(port), paths, header=GZIP)
        row(f"fleet: status of each of the {clusters} clusters in turn, gzip as browsers ask", rps, "req/s")
        row("fleet: status p99, every cluster, gzip", p99, "ms", target="≤ 2 ms")
        def lists():
            return get_json(f"{emu_url}/_emulator/stats")["requests"].get("GET", 0)
        # What one relist costs, without load: the CPU time of the server and of the emulator
        # standing in for the API server (both on this machine's cores).
        before, server_cpu, emulator_cpu = lists(), cpu_ms(p.pid), cpu_ms(emu.pid)
        urllib.request.urlopen(urllib.request.Request(f"{emu_url}/_emulator/expire-watch", method="POST", data=b"{}"))
        deadline = time.time() + 60
        while lists() < before + pods // 100:
            assert time.time() < deadline, "the expired watch did not relist"
            time.sleep(0.01)
        time.sleep(0.5)  # the last page parsed, the summary replaced
        row(f"fleet: CPU the server spends relisting {pods} pods (no load)", cpu_ms(p.pid) - server_cpu, "ms")
        row("fleet: CPU the emulator spends serving them (no load)", cpu_ms(emu.pid) - emulator_cpu, "ms")
        for header, how in ((None, ""), (GZIP, ", gzip")):
            before = lists()
            urllib.request.urlopen(urllib.request.Request(f"{emu_url}/_emulator/expire-watch", method="POST", data=b"{}"))
            # The load starts with the relist (the watcher backs off a moment before listing again).
            deadline = time.time() + 30
            while lists() == before:
                assert time.time() < deadline, "the expired watch did not relist"
                time.sleep(0.01)
            rps, _, p99 = load_rotation(addr_of(port), paths, header=header)
            relisted = lists() - before
            row(f"fleet: status p99, every cluster, while one relists its {pods} pods{how}", p99, "ms", target="≤ 2 ms")
            row(f"fleet: pages of 100 pods relisted meanwhile (all: {pods // 100}){how}", relisted, "pages")
        rps, _, _, size = load(addr_of(port), "/api/clusters")
        row(f"fleet: GET /api/clusters, {clusters} clusters, 20 connections ({size / 1024:.0f} KB)", rps, "req/s",
            target="≥ 20,000 req/s")
        node_names = [f"hyperpod-i-{i:017x}" for i in range(30)]
        lat = sorted(asyncio.run(change_latency(base, emu_url, node_names, clusters)))
        row(f"fleet: node NotReady → told on the event stream for all {clusters} clusters, p50", lat[len(lat) // 2], "ms")
        row(f"fleet: node NotReady → told on the event stream for all {clusters} clusters, p99", lat[-1], "ms",
            target="≤ 100 ms")
        stop(p)
        # Started again with the fleet recorded: it serves at once, the caches fill behind.
        t = time.time()
        p, _ = server(d, port, ("--cloud", "aws"), env)
        wait_http(f"{base}/api/clusters")
        row(f"fleet: start-up to the first cluster list, {clusters} clusters recorded", (time.time() - t) * 1000, "ms",
            target="≤ 1,000 ms")
        row("fleet: watch caches filled in the background after start-up", wait_synced(base, clusters), "s")
        stop(p)
    emu.kill()
    moto.kill()
