"""The benchmark: a release build against moto and the Kubernetes emulator on loopback, with
nodes and pods shaped like real ones, printing each figure beside the public project's where
docs/benchmarks.md records one. Run through scripts/bench (which builds what it needs).

Load runs use wrk (20 connections, 2 threads); sequential latency on new connections uses the
small client in bench/. The generator's own ceiling (wrk on /healthz) is printed first, and each
load figure says what share of that ceiling it is, so a figure near the ceiling reads as the
generator's limit, not the server's. Before it, wrk against a responder that does nothing
(bench/'s `floor`) shows the machine's own latency floor under the same load, and wrk against
axum with one route and nothing else (`floor-axum`) the floor of the server's HTTP stack.

  --json FILE      also write the figures as JSON
  --compare FILE   print each figure's ratio to the same figure of an earlier run's JSON
  --only A,B       run only these sections: edge (always), submissions, lists, status, fleet
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# The fleet section (bench_fleet.py) imports this module by name: make it this same one.
sys.modules.setdefault("bench", sys.modules[__name__])

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(ROOT, ".venv", "bin", "python")
PEERS = os.path.join(ROOT, "tests", "peers")
BIN = os.environ["INSTANTSTART_BIN"]
LOADGEN = os.environ["INSTANTSTART_LOADGEN"]
SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
# The public project's figures (docs/benchmarks.md says where they come from).
ANCHOR = {
    "status 10/100 req/s": 2650,
    "status 200/2000 req/s": 820,
    # Its status refresh: `kubectl get nodes` and `get pods -A` plus `describe-cluster` for
    # capacity types; its node groups view: list-nodegroups, describe-cluster, describe-subnets.
    "aws calls per cluster refresh (record + status)": 1,
    "kube calls per cluster refresh (record + status)": 2,
}
ROWS = []
# The generator's ceiling: wrk's rate on the server's cheapest route (set first).
CEILING = {}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.001)
    raise SystemExit(f"{url} did not answer")


def rss_mib(pid, field="VmRSS"):
    """A process's resident memory: all of it (`VmRSS`), or its private part (`RssAnon`)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def row(what, value, unit, anchor=None, target=None):
    ROWS.append({"what": what, "value": value, "unit": unit, "anchor": anchor, "target": target})
    ratio = f"  ({value / anchor:.1f}× the public project's {anchor:g})" if anchor else ""
    goal = f"  [target {target}]" if target else ""
    share = ""
    if unit == "req/s" and CEILING.get("rps") and not what.startswith("generator"):
        share = f"  <{value / CEILING['rps']:.0%} of the generator's ceiling>"
    print(f"{what:<58} {value:>12.3f} {unit}{ratio}{goal}{share}", flush=True)


def loadgen(*args):
    """The bench/ client: `seq` (new connection per request) answers `p50_ms p99_ms`."""
    out = subprocess.run([LOADGEN, *map(str, args)], check=True, capture_output=True, text=True).stdout
    return [float(x) for x in out.split()]


def wrk_ms(text):
    """A wrk latency (`812.00us`, `1.23ms`, `2.00s`) in milliseconds."""
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m)", text)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def parse_wrk(out):
    """(requests per second, p50 ms, p99 ms, non-2xx/3xx answers) from wrk's `--latency` report."""
    rps = float(re.search(r"^Requests/sec:\s+([0-9.]+)", out, re.M).group(1))
    p50 = wrk_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = wrk_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return rps, p50, p99, int(bad.group(1)) if bad else 0


def load(addr, path, connections=20, seconds=None, header=None):
    """wrk on `path` with `connections` keep-alive connections for `seconds`: (req/s, p50 ms,
    p99 ms, bytes per answer). Every answer must be a 2xx or 3xx."""
    url = f"http://{addr}{path}"
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{max(1, round(seconds or SECONDS))}s", "--latency", url]
    if header:
        cmd += ["-H", header]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rps, p50, p99, bad = parse_wrk(out)
    assert bad == 0, f"{path}: {bad} answers were not 2xx/3xx\n{out}"
    req = urllib.request.Request(url, headers=dict([header.split(": ", 1)]) if header else {})
    try:
        with urllib.request.urlopen(req) as r:
            size = len(r.read())
    except urllib.error.HTTPError as e:
        size = len(e.read())
    return rps, p50, p99, size


def meets(value, target):
    """Whether a figure meets its printed target (`≤ 2 ms`, `≥ 60,000 req/s`, `= 50`, `0 bytes`:
    a bare number means equal), or None for a target that names no number."""
    m = re.match(r"(≤|≥|=)?\s*([0-9][0-9,]*(?:\.[0-9]+)?)", target or "")
    if not m:
        return None
    bound = float(m.group(2).replace(",", ""))
    return {"≤": value <= bound, "≥": value >= bound}.get(m.group(1), value == bound)


def summary(rows):
    """The targets met and, by name, the ones not: the run's verdict in one place."""
    judged = [r for r in rows if meets(r["value"], r["target"]) is not None]
    missed = [r for r in judged if not meets(r["value"], r["target"])]
    print(f"\ntargets met: {len(judged) - len(missed)} of {len(judged)}")
    for r in missed:
        print(f"  not met: {r['what']} ({r['value']:.3f} {r['unit']}; target {r['target']})")


def compare(previous, rows):
    """Each figure beside the same figure of an earlier run (matched by its name without the
    answer's size, which may change), as a ratio."""
    def key(what):
        return re.sub(r" \(\d+ KB\)", "", what)
    before = {key(r["what"]): r for r in previous["rows"]}
    print(f"\ncompared with {previous.get('started', 'an earlier run')}:")
    for r in rows:
        b = before.get(key(r["what"]))
        if not b:
            print(f"  {r['what']:<58} new")
        elif not b["value"]:
            print(f"  {r['what']:<58}      —  ({b['value']:.3f} → {r['value']:.3f} {r['unit']})")
        else:
            print(f"  {r['what']:<58} {r['value'] / b['value']:>6.2f}×  ({b['value']:.3f} → {r['value']:.3f} {r['unit']})")


def image_env():
    """The process settings the container image gives the server (the Dockerfile's `ENV`, less
    the server's own `INSTANTSTART_*` options, which each run sets): the figures are the
    deployed binary's, allocator settings included."""
    text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Dockerfile")).read()
    env = {}
    for block in re.findall(r"^ENV ((?:.*\\\n)*.*)$", text, re.M):
        for k, v in re.findall(r"([A-Z_][A-Z0-9_]*)=(\S+)", block):
            if not k.startswith("INSTANTSTART_"):
                env[k] = v
    return env


IMAGE_ENV = image_env()


def server(data_dir, port, extra_args=("--cloud", "sandbox"), env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INSTANTSTART_"))}
    e.update(IMAGE_ENV)
    e.update({"AWS_EC2_METADATA_DISABLED": "true", "RUST_LOG": "warn"})
    e.update(env or {})
    e = {k: v for k, v in e.items() if v is not None}
    log = open(os.path.join(data_dir, f"server-{port}.log"), "w")
    t = time.time()
    p = subprocess.Popen([BIN, "serve", "--bind", f"127.0.0.1:{port}", "--data-dir", data_dir, *extra_args],
                         env=e, stdout=log, stderr=log)
    wait_http(f"http://127.0.0.1:{port}/healthz")
    return p, (time.time() - t) * 1000


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()


def per_connection_kib(pid, port, n=200):
    """What each open keep-alive connection costs the server: `n` clients connect, each sends
    one request and keeps its connection; the growth of the resident set, per connection."""
    before = rss_mib(pid)
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    for s in socks:
        s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    for s in socks:
        s.recv(4096)
    grown = rss_mib(pid) - before
    for s in socks:
        s.close()
    return grown * 1024 / n


def startup_and_lists():
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        # Once to read the binary from disk: the figure is the start-up, not the page cache.
        p, _ = server(d, port)
        stop(p)
        p, ms = server(d, port)
        row("start-up to the first 200 (sandbox)", ms, "ms", target="≤ 50 ms")
        time.sleep(0.5)
        row("resident memory, idle", rss_mib(p.pid), "MiB", target="≤ 25 MiB")
        # The rest of VmRSS is pages of the binary mapped from the page cache: how many
        # depends on how much of the file is cached (the kernel maps cached neighbours of each
        # page start-up touches), so the same binary measures 1-3 MiB apart. This part does not.
        row("resident memory, idle, private (RssAnon)", rss_mib(p.pid, "RssAnon"), "MiB")
        row("resident memory per open connection (200 kept open, one request each)",
            per_connection_kib(p.pid, port), "KiB")
        stop(p)
        db = sqlite3.connect(os.path.join(d, "instantstart.db"))
        have = 0
        for n in (1, 30, 300):
            now = "2026-12-01T00:00:00.000Z"
            for i in range(have, n):
                name = f"bench-{i:03d}"
                db.execute("INSERT INTO clusters (name, region, spec_json, created_at, updated_at) VALUES (?, 'us-west-2', '{}', ?, ?)",
                           (name, now, now))
                for k, kind in enumerate(("cluster", "dependencies", "hyperpod", "storage")):
                    op = f"01900000-{i:04d}-{k:04d}-0000-000000000000"
                    db.execute("INSERT INTO operations (id, kind, cluster, params_json, state, actor, created_at, updated_at) "
                               "VALUES (?, ?, ?, '{}', 'succeeded', 'bench', ?, ?)", (op, kind, name, now, now))
                    db.execute("INSERT INTO phases (operation_id, seq, name, state) VALUES (?, 0, 'a', 'succeeded')", (op,))
            db.commit()
            have = n
            p, _ = server(d, port)
            for path, label, target in (("/api/clusters?limit=1000", "GET /api/clusters", {30: "≥ 10,000 req/s", 300: "≥ 2,000 req/s"}),
                                        ("/api/operations", "GET /api/operations", {})):
                rps, p50, _, size = load(f"127.0.0.1:{port}", path)
                row(f"{label}, {n} clusters, 20 connections ({size / 1024:.0f} KB)", rps, "req/s", target=target.get(n))
            stop(p)
        db.close()


def start_peer(script, *args):
    p = subprocess.Popen([PY, os.path.join(PEERS, script), *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return p


def drain(p):
    """Reads a peer's output from here on, so a full pipe never blocks it."""
    import threading
    threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()


def get_json(url, method="GET"):
    with urllib.request.urlopen(urllib.request.Request(url, method=method)) as r:
        return json.load(r)


def histogram_totals(base, name):
    """(sum, count) of an unlabelled histogram on the server's /metrics."""
    with urllib.request.urlopen(f"{base}/metrics") as r:
        text = r.read().decode()
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith(f"{name}_sum "):
            total = float(line.split()[1])
        elif line.startswith(f"{name}_count "):
            count = float(line.split()[1])
    return total, count


def mcp_overhead(base, tool, args, calls=300):
    """Sequential MCP tool calls of cluster_status through the official client; the server
    times each call outside the REST handler it dispatches to
    (instantstart_mcp_tool_overhead_seconds). Ten warm-up calls first (the tool catalogue is
    built on first use), so the figure is the steady state: the mean of the measured calls."""
    import asyncio
    from mcp import Client

    name = "instantstart_mcp_tool_overhead_seconds"
    marks = []

    async def run():
        async with Client(f"{base}/mcp") as client:
            for i in range(10 + calls):
                if i == 10:
                    marks.append(histogram_totals(base, name))
                r = await client.call_tool(tool, args)
                assert not r.is_error, r

    asyncio.run(run())
    (s0, c0), (s1, c1) = marks[0], histogram_totals(base, name)
    return (s1 - s0) / (c1 - c0) * 1000


def calls_per_read(base, moto_url, emu_url):
    """AWS calls (counted at moto) and Kubernetes requests (counted at the emulator) made by a
    cluster refresh (its record and its status, as the UI polls them) and by a node listing."""
    def kube_requests():
        return sum(get_json(f"{emu_url}/_emulator/stats")["requests"].values())

    figures = {}
    for what, paths in (("cluster refresh (record + status)", ("/api/clusters/bench", "/api/clusters/bench/status")),
                        ("node listing", ("/api/clusters/bench/nodes",))):
        get_json(f"{moto_url}/_gapfiller/calls", "DELETE")
        k0 = kube_requests()
        rounds = 10
        for _ in range(rounds):
            for path in paths:
                urllib.request.urlopen(f"{base}{path}").read()
        aws = sum(get_json(f"{moto_url}/_gapfiller/calls").values()) / rounds
        figures[what] = (aws, (kube_requests() - k0) / rounds)
    return figures


def aws_peers(nodes, pods, role_name):
    """moto and the Kubernetes emulator (seeded with `nodes` and `pods` shaped like real ones)
    on loopback, and an EKS role in moto: (moto, emulator, emulator URL, server env, boto3
    session, role ARN)."""
    import boto3
    moto_port = free_port()
    moto = start_peer("moto_server.py", "-H", "127.0.0.1", "-p", str(moto_port))
    wait_http(f"http://127.0.0.1:{moto_port}/moto-api/", 60)
    emu = start_peer("kube_emulator.py", "--seed-nodes", str(nodes), "--seed-pods", str(pods), "--pod-shape", "real")
    emu_url = emu.stdout.readline().strip().removeprefix("READY ")
    drain(moto)
    drain(emu)
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}", "AWS_REGION": "us-west-2",
           "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "INSTANTSTART_KUBE_URL": emu_url}
    session = boto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-west-2")
    role = session.client("iam", endpoint_url=env["AWS_ENDPOINT_URL"]).create_role(
        RoleName=role_name, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}))
    return moto, emu, emu_url, env, session, role["Role"]["Arn"]


def status_at(nodes, pods):
    moto, emu, emu_url, env, session, role = aws_peers(nodes, pods, "bench-eks")
    session.client("eks", endpoint_url=env["AWS_ENDPOINT_URL"]).create_cluster(
        name="bench", roleArn=role, resourcesVpcConfig={"subnetIds": ["subnet-1", "subnet-2"]})
    # The HyperPod cluster behind it, with as many instances as the emulator has nodes.
    session.client("sagemaker", endpoint_url=env["AWS_ENDPOINT_URL"]).create_cluster(
        ClusterName="bench-hp", Orchestrator={"Eks": {"ClusterArn": "arn:aws:eks:us-west-2:123456789012:cluster/bench"}},
        InstanceGroups=[{"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "InstanceCount": nodes, "ThreadsPerCore": 1,
                         "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-bench/lifecycle", "OnCreate": "on_create.sh"},
                         "ExecutionRole": role}])
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        p, _ = server(d, port, ("--cloud", "aws"), env)
        base = f"http://127.0.0.1:{port}"
        req = urllib.request.Request(f"{base}/api/clusters/import", data=json.dumps({"eksClusterName": "bench", "hyperpodClusterName": "bench-hp"}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        op = json.load(urllib.request.urlopen(req))["operationId"]
        for _ in range(120):
            state = json.load(urllib.request.urlopen(f"{base}/api/operations/{op}?wait=20"))["state"]
            if state in ("succeeded", "failed", "cancelled"):
                break
        assert state == "succeeded", state
        wait_http(f"{base}/api/clusters/bench/status", 60)
        path = "/api/clusters/bench/status"
        p50, p99 = loadgen("seq", f"127.0.0.1:{port}", path, 1000)
        row(f"status p50, {nodes} nodes / {pods} pods, sequential, new connection", p50, "ms")
        row(f"status p99, {nodes} nodes / {pods} pods, sequential, new connection", p99, "ms", target="≤ 2 ms")
        rps, _, p99c, size = load(f"127.0.0.1:{port}", path)
        key = f"status {nodes}/{pods} req/s"
        row(f"status, {nodes}/{pods}, 20 connections ({size / 1024:.0f} KB)", rps, "req/s",
            anchor=ANCHOR.get(key), target="≥ 25,000 req/s" if (nodes, pods) == (200, 5000) else None)
        row(f"status p99, {nodes}/{pods}, 20 connections", p99c, "ms",
            target="≤ 2 ms" if (nodes, pods) == (200, 5000) else None)
        # As the UI polls it: every browser asks for gzip, and the answer is encoded once per view.
        rps, _, p99c, size = load(f"127.0.0.1:{port}", path, header="Accept-Encoding: gzip, deflate, br")
        row(f"status, {nodes}/{pods}, 20 connections, gzip as browsers ask ({max(1, round(size / 1024))} KB)", rps, "req/s",
            target="≥ 25,000 req/s" if (nodes, pods) == (200, 5000) else None)
        row(f"status p99, {nodes}/{pods}, 20 connections, gzip", p99c, "ms",
            target="≤ 2 ms" if (nodes, pods) == (200, 5000) else None)
        with urllib.request.urlopen(f"{base}{path}") as r:
            etag = r.headers["ETag"]
        rps304, *_ = load(f"127.0.0.1:{port}", path, header=f"If-None-Match: {etag}")
        row(f"status, {nodes}/{pods}, 20 connections, If-None-Match → 304", rps304, "req/s")
        row(f"resident memory, {nodes} nodes / {pods} pods cached", rss_mib(p.pid), "MiB",
            target="≤ 60 MiB" if pods == 5000 else None)
        if (nodes, pods) == (200, 2000):
            for what, (aws, kube) in calls_per_read(base, env["AWS_ENDPOINT_URL"], emu_url).items():
                row(f"AWS calls per {what}, {nodes} nodes", aws, "calls",
                    anchor=ANCHOR.get(f"aws calls per {what}"))
                row(f"Kubernetes requests per {what}, {nodes} nodes", kube, "requests",
                    anchor=ANCHOR.get(f"kube calls per {what}"))
            for tool, path in (("cluster_get", "/api/clusters/bench"), ("cluster_status", "/api/clusters/bench/status")):
                with urllib.request.urlopen(f"{base}{path}") as r:
                    size = len(r.read()) / 1024
                row(f"MCP tool-call overhead over the same REST call ({tool}, {size:.0f} KB, mean)",
                    mcp_overhead(base, tool, {"name": "bench"}), "ms", target="≤ 1 ms")
        stop(p)
    emu.kill()
    moto.kill()


# What the Dockerfile's runtime image (gcr.io/distroless/cc-debian12) is made of: these Debian
# bookworm packages, of which distroless keeps the files a program needs (so their installed
# size is an upper bound of the base).
DISTROLESS_CC = ["base-files", "netbase", "tzdata", "media-types", "ca-certificates", "libc6",
                 "libssl3", "libgcc-s1", "libgomp1", "libstdc++6"]


def image_weight():
    """The container image: the binary's layer (and what it weighs gzip-compressed, as a registry
    stores and sends it) plus the distroless base, weighed from its packages' metadata (apt)."""
    import gzip
    with open(BIN, "rb") as f:
        layer = len(gzip.compress(f.read(), compresslevel=6))
    row("container image: the binary's layer, gzip-compressed", layer / 1024 / 1024, "MiB")
    installed = packed = 0
    for pkg in DISTROLESS_CC:
        out = subprocess.run(["apt-cache", "show", "--no-all-versions", pkg], capture_output=True, text=True).stdout
        fields = dict(re.findall(r"^(Installed-Size|Size): (\d+)$", out, re.M))
        if len(fields) < 2:
            return print(f"(the base image's packages are not known to apt here: {pkg})")
        installed += int(fields["Installed-Size"]) * 1024
        packed += int(fields["Size"])
    row("container image: distroless cc-debian12 base, installed (at most)", installed / 1024 / 1024, "MiB")
    row("container image: the whole, uncompressed (at most)", (installed + os.path.getsize(BIN)) / 1024 / 1024, "MiB")
    row("container image: the whole, compressed (about)", (packed + layer) / 1024 / 1024, "MiB")


def machine_floor():
    """What this machine costs before any server works: wrk against the bench/ client's `floor`
    responder (two worker threads, `200 ok` to every request, nothing else). Its p99 is the
    scheduler's and loopback's share of every p99 below, which no server can go under here.
    Then the same against `floor-axum`: the server's HTTP stack (axum over hyper) answering
    `/healthz` with nothing behind it, the floor of the server's own `/healthz`."""
    for mode, floor_of, what, path in (("floor", "machine floor", "a do-nothing responder", "/"),
                                       ("floor-axum", "HTTP stack floor", "axum answering /healthz alone", "/healthz")):
        port = free_port()
        floor = subprocess.Popen([LOADGEN, mode, str(port)], stdout=subprocess.PIPE, text=True)
        try:
            assert floor.stdout.readline().strip() == "READY"
            rps, _, p99, _ = load(f"127.0.0.1:{port}", path)
            row(f"{floor_of}: {what}, 20 connections", rps, "req/s")
            row(f"{floor_of}: its p99, 20 connections", p99, "ms")
        finally:
            floor.kill()
            floor.wait()


def ceiling_and_edge():
    """The generator's ceiling (wrk on /healthz, the server's cheapest route: no store, no
    cloud) and the edge's cost: that route at the default log level, and the log an idle
    server under a 1 Hz probe writes."""
    machine_floor()
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        # At the default configuration (server() passes no INSTANTSTART_* setting).
        p, _ = server(d, port)
        rps, p50, p99, _ = load(f"127.0.0.1:{port}", "/healthz")
        CEILING["rps"] = rps
        row("generator ceiling: wrk on GET /healthz, 20 connections", rps, "req/s", target="≥ 60,000 req/s")
        row("GET /healthz p99, 20 connections", p99, "ms")
        log = os.path.join(d, f"server-{port}.log")
        size = os.path.getsize(log)
        for _ in range(5):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").read()
            time.sleep(1)
        row("log written by an idle server, 5 probes at 1 Hz", os.path.getsize(log) - size, "bytes", target="0 bytes")
        stop(p)


def submissions_under_load(clusters=50, per_cluster=4):
    """200 submissions at once (each on its own connection, all connected first), four for each
    of 50 new clusters (`POST /api/pipelines`): each
    is accepted (202, one per cluster) or refused with a problem (409: the cluster is taken);
    none is lost or doubled (the operations recorded afterwards are exactly those accepted) and
    no store error reaches a caller."""
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        p, _ = server(d, port)
        base = f"http://127.0.0.1:{port}"
        bodies = [{"name": f"fleet-{i:02d}", "zone": "us-west-2a", "instanceType": "ml.g5.8xlarge",
                   "instanceCount": 1, "capacityType": "on-demand"}
                  for i in range(clusters) for _ in range(per_cluster)]
        # The bench/ client connects all first, then sends all at once, timing each alone.
        with open(os.path.join(d, "bodies.jsonl"), "w") as f:
            f.writelines(json.dumps(b) + "\n" for b in bodies)
        out = subprocess.run([LOADGEN, "burst", f"127.0.0.1:{port}", "/api/pipelines", f.name],
                             check=True, capture_output=True, text=True).stdout
        answers = []
        for line in out.splitlines():
            status, ms, body = line.split(" ", 2)
            answer = json.loads(body or "{}")
            answers.append((int(status), answer, "problem" if "title" in answer and "type" in answer else "", float(ms)))
        accepted = [a for a in answers if a[0] == 202]
        refused = [a for a in answers if a[0] == 409 and a[2] == "problem"]
        wrong = [a for a in answers if a not in accepted and a not in refused]
        ms = sorted(a[3] for a in accepted)
        row(f"submissions at once: {len(bodies)} over {clusters} clusters, accepted", len(accepted), "requests",
            target=f"= {clusters}")
        row("submissions at once: refused with a 409 problem", len(refused), "requests",
            target=f"= {len(bodies) - clusters}")
        row("submissions at once: any other answer (store errors included)", len(wrong), "requests", target="0")
        if ms:
            row("submissions at once: p99 to accept", ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))], "ms",
                target="≤ 50 ms")
        # The server's own view (its request histogram): the bucket holding the 99th percentile
        # of every answer.
        with urllib.request.urlopen(f"{base}/metrics") as r:
            text = r.read().decode()
        buckets = sorted((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), float(m.group(2)))
                         for m in re.finditer(r'http_request_duration_seconds_bucket\{le="([^"]+)",method="POST",route="/api/pipelines"\} (\S+)', text))
        if buckets:
            total = buckets[-1][1]
            le = next(b for b, n in buckets if n >= 0.99 * total)
            row("submissions at once: p99 in the server (its histogram's bucket)", le * 1000, "ms ≤",
                target="≤ 50 ms")
        ids = {a[1].get("operationId") for a in accepted}
        with urllib.request.urlopen(f"{base}/api/operations?limit=1000") as r:
            listed = json.load(r)
        pipelines = {o["id"] for o in listed if o["kind"] == "pipeline"}
        row("submissions at once: accepted but not recorded, or recorded twice",
            len(ids ^ pipelines) + (len(accepted) - len(ids)), "operations", target="0")
        stop(p)

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the figures to this file as JSON")
    parser.add_argument("--compare", help="an earlier run's JSON to compare each figure with")
    parser.add_argument("--only", help="comma-separated sections to run (edge always runs): "
                                       "edge, submissions, lists, status, fleet")
    args = parser.parse_args()
    previous = json.load(open(args.compare)) if args.compare else None
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: run scripts/bench, which installs it")
    started = time.strftime('%Y-%m-%d %H:%M')
    print(f"InstantStart benchmark · {started} · {os.cpu_count()} cores · {BIN}")
    import bench_fleet  # after this module's names exist: it imports them
    sections = {
        "edge": ceiling_and_edge,
        "submissions": submissions_under_load,
        "lists": startup_and_lists,
        "status": lambda: [status_at(n, p) for n, p in ((10, 100), (200, 2000), (200, 5000))],
        "fleet": lambda: bench_fleet.fleet(int(os.environ.get("BENCH_FLEET", "20")), pods=int(os.environ.get("BENCH_FLEET_PODS", "10000"))),
    }
    only = args.only.split(",") if args.only else list(sections)
    unknown = set(only) - set(sections)
    if unknown:
        raise SystemExit(f"--only: no section {', '.join(sorted(unknown))} (there are {', '.join(sections)})")
    row("release binary size", os.path.getsize(BIN) / 1024 / 1024, "MiB", target="≤ 30 MiB")
    image_weight()
    # The generator's ceiling comes first, so every later req/s figure can say its share.
    for name in ["edge"] + [n for n in only if n != "edge"]:
        sections[name]()
    summary(ROWS)
    for r in ROWS:
        r["met"] = meets(r["value"], r["target"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started, "cores": os.cpu_count(), "seconds": SECONDS, "rows": ROWS}, f, indent=1)
    if previous:
        compare(previous, ROWS)


if __name__ == "__main__":
    sys.exit(main())
