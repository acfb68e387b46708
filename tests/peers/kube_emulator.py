"""A Kubernetes API emulator for the tests: kmock's KubernetesEmulator plus the few behaviours
kube-rs relies on that kmock does not have. Test infrastructure, not product.

Run: python kube_emulator.py [--seed-nodes N --seed-pods M]
Prints `READY http://127.0.0.1:<port>` once listening; serves until killed.

Gaps filled (see the project's test-peer notes for how plain kmock behaves):
  * `/api/v1/namespaces[/name]` is a resource path, not a namespace prefix;
  * created objects get metadata.namespace/uid/resourceVersion/creationTimestamp/generation
    (kube-runtime's watcher needs resourceVersion; kmock's watch filters on metadata.namespace);
  * error reasons `NotFound` and `AlreadyExists` (kube-rs's is_not_found()/get_opt() check them);
  * label and field selectors on list and watch;
  * server-side apply on a missing object creates it;
  * PUT replaces an object; DELETE on a collection deletes what matches;
  * lists are paged by `limit` with `metadata.continue`, as the API server pages them.
Extra: `POST /_emulator/expire-watch` ends the next open pod watch with `410 Expired` (its client
relists, as after a long disconnection). `GET /_emulator/stats` returns counts of requests by method (`requests`, watches apart)
and of mutating requests, so a test can prove that a
second reconciliation changes nothing, and of pod log streams (`logs`: open, opened, closed), so a
test can prove that a follow closed upstream. `POST /_emulator/logs/<namespace>/<pod>` with
`{"lines": [...]}` appends to a pod's log (`{"line_of_bytes": N}` one line of N bytes, as a
runaway workload writes it); `GET …/pods/<pod>/log` serves it (`tailLines`, `limitBytes`,
`follow=true` streams new lines until the client goes away). The service proxy
(`POST /api/v1/namespaces/<ns>/services/<svc>:<port>/proxy/<path>`) answers what
`POST /_emulator/service-answers/<ns>/<svc>` seeded, or 503 as for a service without endpoints.
jupyter-k8s's validating webhook, as AWS's Spaces add-on runs it: AWS's two workspace templates
(`tests/fixtures/aws/jupyter-k8s-aws-templates.yaml`) are served in `jupyter-k8s-system`, the
controller's shared template namespace, and a `Workspace` created or replaced is refused (403, as
the API server relays a webhook's denial) when its `templateRef.namespace` is neither its own
nor that one, when the template does not exist, or when its image or home storage is outside
the template's bounds (`jupyter-infra/jupyter-k8s` `internal/webhook/v1alpha1/
template_validator.go` at f2670353e769c58b4164d0a08c6f296a1e4e9b3e).
A `WorkspaceConnection` POST is answered as jupyter-k8s's extension API answers it (a URL for an
`{ide}-remote` type of an Available workspace; 400 for `web-ui`, whose web access is not set
up here) and kept in `connections` of the stats, never stored as an object.
"""

import argparse
import asyncio
import datetime
import itertools
import json
import re
import sys
import uuid

import aiohttp.web
import attrs
import kmock
import os
import yaml
from kmock._internal import k8s, parsing

TEMPLATES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "aws", "jupyter-k8s-aws-templates.yaml")
SHARED_TEMPLATES = "jupyter-k8s-system"

RESOURCES = {
    # group/version/plural: (kind, namespaced, subresources)
    "v1/namespaces": ("Namespace", False, ["status"]),
    "v1/nodes": ("Node", False, ["status"]),
    "v1/pods": ("Pod", True, ["status", "log"]),
    "v1/services": ("Service", True, ["status"]),
    "v1/serviceaccounts": ("ServiceAccount", True, []),
    "v1/configmaps": ("ConfigMap", True, []),
    "v1/secrets": ("Secret", True, []),
    "v1/events": ("Event", True, []),
    "v1/persistentvolumes": ("PersistentVolume", False, ["status"]),
    "v1/persistentvolumeclaims": ("PersistentVolumeClaim", True, ["status"]),
    "apps/v1/deployments": ("Deployment", True, ["status"]),
    "apps/v1/daemonsets": ("DaemonSet", True, ["status"]),
    "batch/v1/jobs": ("Job", True, ["status"]),
    "rbac.authorization.k8s.io/v1/clusterroles": ("ClusterRole", False, []),
    "rbac.authorization.k8s.io/v1/clusterrolebindings": ("ClusterRoleBinding", False, []),
    "rbac.authorization.k8s.io/v1/roles": ("Role", True, []),
    "rbac.authorization.k8s.io/v1/rolebindings": ("RoleBinding", True, []),
    "apiextensions.k8s.io/v1/customresourcedefinitions": ("CustomResourceDefinition", False, ["status"]),
    "apiregistration.k8s.io/v1/apiservices": ("APIService", False, ["status"]),
    "ray.io/v1/rayjobs": ("RayJob", True, ["status"]),
    "sagemaker.amazonaws.com/v1/hyperpodpytorchjobs": ("HyperPodPyTorchJob", True, ["status"]),
    "inference.sagemaker.aws.amazon.com/v1/inferenceendpointconfigs": ("InferenceEndpointConfig", True, ["status"]),
    "kueue.x-k8s.io/v1beta1/workloads": ("Workload", True, ["status"]),
    "kueue.x-k8s.io/v1beta1/clusterqueues": ("ClusterQueue", False, ["status"]),
    "kueue.x-k8s.io/v1beta1/localqueues": ("LocalQueue", True, ["status"]),
    "workspace.jupyter.org/v1alpha1/workspaces": ("Workspace", True, ["status"]),
    "workspace.jupyter.org/v1alpha1/workspacetemplates": ("WorkspaceTemplate", True, []),
    # jupyter-k8s's extension API: create-only, answered and never stored (see `connect`).
    "connection.workspace.jupyter.org/v1alpha1/workspaceconnections": ("WorkspaceConnection", True, []),
    "keda.sh/v1alpha1/scaledobjects": ("ScaledObject", True, ["status"]),
    "keda.sh/v1alpha1/triggerauthentications": ("TriggerAuthentication", True, []),
    # HyperPod-managed Karpenter: the controller runs in AWS, only its objects live here.
    "karpenter.sh/v1/nodepools": ("NodePool", False, ["status"]),
    "karpenter.sagemaker.amazonaws.com/v1/hyperpodnodeclasses": ("HyperpodNodeClass", False, ["status"]),
}

SERVICE_PROXY = re.compile(r"^/api/v1/namespaces/([^/]+)/services/([^/:]+):([0-9]+)/proxy/(.*)$")

_original_parse_path = parsing.parse_path


def parse_path(path):
    """kmock reads `/api/v1/namespaces` as a namespace prefix with nothing after it."""
    parts = path.strip("/").split("/")
    if parts[:3] == ["api", "v1", "namespaces"] and len(parts) <= 5 and (len(parts) <= 4 or parts[4] in ("status", "finalize")):
        name = parts[3] if len(parts) > 3 else None
        sub = parts[4] if len(parts) > 4 else None
        return parsing.ParsedPath("", "v1", "namespaces", None, name, sub)
    return _original_parse_path(path)


parsing.parse_path = parse_path


def matches_labels(obj, selector):
    """`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma-separated."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    terms, depth, cur = [], 0, ""
    for ch in selector:  # split on commas outside parentheses
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    for term in (t.strip() for t in terms if t.strip()):
        if " notin " in term or " in " in term:
            key, op, values = term.partition(" notin ") if " notin " in term else term.partition(" in ")
            allowed = {v.strip() for v in values.strip().strip("()").split(",")}
            inside = labels.get(key.strip()) in allowed
            if (op.strip() == "in") != inside:
                return False
        elif "!=" in term:
            key, _, value = term.partition("!=")
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, _, value = term.replace("==", "=").partition("=")
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def matches_fields(obj, selector):
    """`a.b=v` / `a.b!=v` on simple dotted paths (`metadata.name`, `spec.nodeName`...)."""
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        negate = "!=" in term
        path, _, value = term.replace("!=", "=").replace("==", "=").partition("=")
        cur = obj
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if (str(cur) if cur is not None else "") == value and negate:
            return False
        if (str(cur) if cur is not None else "") != value and not negate:
            return False
    return True


def quantity(q):
    """A Kubernetes quantity in bytes (the binary and decimal suffixes the templates use)."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    q = str(q)
    for suffix, mult in units.items():
        if q.endswith(suffix) and q[:-len(suffix)].isdigit():
            return int(q[:-len(suffix)]) * mult
    return int(q) if q.isdigit() else None


def selected(obj, params):
    return matches_labels(obj, params.get("labelSelector", "")) and matches_fields(obj, params.get("fieldSelector", ""))


class Emulator(kmock.KubernetesEmulator):
    """kmock plus the gaps above. All state stays in kmock's own object store."""

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self.versions = itertools.count(1)
        self.mutations = {}
        self.requests = {}
        self.logs = {}
        self.service_answers = {}
        self.log_tick = asyncio.Event()
        self.log_streams = {"open": 0, "opened": 0, "closed": 0}
        self.connections = []
        # What the workspace webhook refused, in order (see `admit_workspace`).
        self.denials = []
        # Watches still to be ended with 410 Expired (see `/_emulator/expire-watch`).
        self.to_expire = 0
        self._serving = {}
        # The items of each paged list still being read, by its version (see `_serve_list`).
        self.snapshots = {}
        # Each object's JSON by its resourceVersion (unique to one version of one object).
        self.encodings = {}

    def stamp(self, data, namespace, name):
        meta = data.setdefault("metadata", {})
        if namespace and not meta.get("namespace"):
            meta["namespace"] = namespace
        meta.setdefault("name", name)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self.versions))

    def exists(self, request):
        key = (request.resource, request.namespace, request.name)
        return key in self.objects and not self.objects[key].deleted

    async def _handle(self, request):
        # kmock keeps every request it ever served and, before answering a new one, walks that
        # history to find it again: the emulator slowed down as it aged (after a few thousand
        # requests a node PATCH took ~100 ms). Only the requests still being served are kept.
        self._serving[id(request)] = request
        self._requests[:] = [r for r in self._requests if id(r) in self._serving]
        try:
            return await self._answer(request)
        finally:
            self._serving.pop(id(request), None)

    async def _answer(self, request):
        if request.url.path == "/_emulator/stats":
            return aiohttp.web.json_response({"mutations": self.mutations, "logs": self.log_streams,
                                              "requests": self.requests, "connections": self.connections,
                                              "denials": self.denials})
        method = str(request.method.value if hasattr(request.method, "value") else request.method).upper()
        if request.url.path == "/_emulator/expire-watch" and method == "POST":
            # The next open pod watch to see this ends with `410 Expired`, as the API server ends
            # a watch whose resourceVersion is too old: its client must list everything again.
            self.to_expire += 1
            await self._buses[kmock.resource("", "v1", "pods")].put({"type": "EXPIRE", "object": {"metadata": {}}})
            return aiohttp.web.json_response({"expiring": self.to_expire})
        if request.url.path.startswith("/_emulator/service-answers/") and method == "POST":
            _, _, _, namespace, service = request.url.path.split("/")
            self.service_answers[(namespace, service)] = request.data
            return aiohttp.web.json_response({"seeded": service})
        proxied = SERVICE_PROXY.match(request.url.path)
        if proxied and method == "POST":
            return self.serve_proxy(*proxied.groups())
        if request.url.path.startswith("/_emulator/logs/") and method == "POST":
            _, _, _, namespace, pod = request.url.path.split("/")
            flood = request.data.get("line_of_bytes")
            lines = ["z" * int(flood)] if flood else []
            self.logs.setdefault((namespace, pod), []).extend(lines + request.data.get("lines", []))
            tick, self.log_tick = self.log_tick, asyncio.Event()
            tick.set()
            return aiohttp.web.json_response({"lines": len(self.logs[(namespace, pod)])})
        if request.resource is not None and request.subresource == "log" and method == "GET":
            return await self.serve_log(request)
        if request.resource is not None:
            kind = "watch" if request.params.get("watch") in ("true", "1") else method
            self.requests[kind] = self.requests.get(kind, 0) + 1
        if request.resource is not None and method in ("POST", "PUT", "PATCH", "DELETE"):
            self.mutations[method] = self.mutations.get(method, 0) + 1
        if request.resource is not None and getattr(request.resource, "plural", None) == "workspaceconnections":
            return self.connect(request, method)
        if request.resource is None:
            return await super()._handle(request)
        is_apply = "apply-patch" in request.headers.get("Content-Type", "")
        if (getattr(request.resource, "plural", None) == "workspaces" and not request.subresource
                and isinstance(request.data, dict) and (method in ("POST", "PUT") or (method == "PATCH" and is_apply))):
            why = self.admit_workspace(request.data, request.namespace)
            if why:
                self.denials.append(why)
                return aiohttp.web.json_response(
                    {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                     "message": f'admission webhook "vworkspace-v1alpha1.kb.io" denied the request: {why}'}, status=403)
        if method == "PATCH" and request.name and is_apply and not request.subresource and not self.exists(request):
            return await self.create_by_apply(request)
        elif method == "POST" and isinstance(request.data, dict):
            meta = request.data.get("metadata") or {}
            self.stamp(request.data, request.namespace, meta.get("name"))
        elif method == "PATCH" and isinstance(request.data, dict) and self.exists(request):
            request.data.setdefault("metadata", {})["resourceVersion"] = str(next(self.versions))
        elif method == "PUT" and request.name:
            return await self.replace(request)
        elif method == "DELETE" and request.name is None:
            return await self.delete_collection(request)
        return await super()._handle(request)

    def admit_workspace(self, workspace, namespace):
        """jupyter-k8s's `ValidateCreateWorkspace` with AWS's templates; the reason, or None."""
        spec = workspace.get("spec") or {}
        ref = spec.get("templateRef")
        if not ref:
            return None
        ns = (workspace.get("metadata") or {}).get("namespace") or namespace
        tns = ref.get("namespace") or ""
        if tns and tns != ns and tns != SHARED_TEMPLATES:
            return (f'templateRef.namespace "{tns}" is not allowed: templates must be in the workspace namespace '
                    f'"{ns}" or the shared namespace "{SHARED_TEMPLATES}"')
        key = (kmock.resource("workspace.jupyter.org", "v1alpha1", "workspacetemplates"), tns or ns, ref.get("name"))
        if key not in self.objects or self.objects[key].deleted:
            return f'workspacetemplates.workspace.jupyter.org "{ref.get("name")}" not found'
        template = self.objects[key].raw["spec"]
        violations = []
        image = spec.get("image")
        allowed = template.get("allowedImages") or [template.get("defaultImage")]
        if image and not template.get("allowCustomImages") and image not in allowed:
            violations.append(f"Image '{image}' is not allowed by template '{ref['name']}'. Allowed images: {allowed}")
        size = quantity((spec.get("storage") or {}).get("size") or "0")
        bounds = template.get("primaryStorage") or {}
        if size and bounds.get("maxSize") and size > quantity(bounds["maxSize"]):
            violations.append(f"storage size exceeds maximum {bounds['maxSize']} allowed by template '{ref['name']}'")
        if size and bounds.get("minSize") and size < quantity(bounds["minSize"]):
            violations.append(f"storage size is below minimum {bounds['minSize']} required by template '{ref['name']}'")
        if violations:
            return f"workspace violates template '{ref['name']}' constraints: " + "; ".join(violations)
        return None

    def connect(self, request, method):
        """jupyter-k8s's connection route: validate, check the workspace is Available, answer."""
        def refuse(code, reason, message):
            return aiohttp.web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                              "message": message, "reason": reason, "code": code}, status=code)
        if method != "POST":
            return refuse(405, "MethodNotAllowed", "Connection must use POST method")
        body = request.data if isinstance(request.data, dict) else {}
        self.connections.append(body)
        spec = body.get("spec") or {}
        name, kind = spec.get("workspaceName", ""), spec.get("workspaceConnectionType", "")
        ide = kind[:-len("-remote")] if kind.endswith("-remote") else None
        if kind != "web-ui" and not (ide and ide.isalpha()):
            return refuse(400, "BadRequest", f"invalid workspaceConnectionType: '{kind}'")
        key = (kmock.resource("workspace.jupyter.org", "v1alpha1", "workspaces"), request.namespace, name)
        workspace = self.objects[key] if key in self.objects else None
        if workspace is None or workspace.deleted:
            return refuse(404, "NotFound", f'workspaces.workspace.jupyter.org "{name}" not found')
        conditions = (workspace.raw.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions):
            return refuse(400, "BadRequest", "workspace is not available. Check workspace status for details")
        if kind == "web-ui":
            return refuse(400, "BadRequest", "web browser access is not enabled for this workspace")
        url = (f"{ide}://amazonwebservices.aws-toolkit-vscode/connect/workspace?sessionId=emulated-{uuid.uuid4().hex[:12]}"
               f"&workspaceName={name}&namespace={request.namespace}")
        return aiohttp.web.json_response({**body, "status": {"workspaceConnectionType": kind,
                                                             "workspaceConnectionUrl": url}}, status=201)

    def serve_proxy(self, namespace, service, port, path):
        """The API server's service proxy: the answer `POST /_emulator/service-answers/<ns>/<svc>`
        seeded (`{"answer": {...}}`, or `{"bytes": N}`: a JSON string of N bytes, as a server that
        answers without end), else 503 as when the service has no ready endpoint."""
        seeded = self.service_answers.get((namespace, service))
        if seeded is None:
            return aiohttp.web.json_response(
                {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "ServiceUnavailable",
                 "message": f'no endpoints available for service "{service}"', "code": 503}, status=503)
        if "bytes" in seeded:
            return aiohttp.web.Response(body=b'"' + b"z" * int(seeded["bytes"]) + b'"',
                                        content_type="application/json")
        return aiohttp.web.json_response(seeded.get("answer", {}))

    async def serve_log(self, request):
        """The pod `log` subresource: the log so far, or (`follow=true`) a stream of it that
        ends when the client disconnects; open streams are counted."""
        if not self.exists(request):
            raise k8s.KubernetesObjectNotFoundError()
        key = (request.namespace, request.name)
        lines = list(self.logs.get(key, []))
        tail = request.params.get("tailLines")
        if tail is not None:
            lines = lines[-int(tail):] if int(tail) > 0 else []
        if request.params.get("follow") != "true":
            body = "".join(f"{line}\n" for line in lines).encode()
            # The API server stops after `limitBytes` (it may end inside a line).
            limit = request.params.get("limitBytes")
            if limit is not None:
                body = body[:int(limit)]
            return aiohttp.web.Response(body=body, content_type="text/plain")
        raw = request._raw_request
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(raw)
        self.log_streams["open"] += 1
        self.log_streams["opened"] += 1
        sent = len(self.logs.get(key, []))
        try:
            for line in lines:
                await response.write(f"{line}\n".encode())
            while raw.transport is not None and not raw.transport.is_closing():
                current = self.logs.get(key, [])
                for line in current[sent:]:
                    await response.write(f"{line}\n".encode())
                sent = len(current)
                tick = self.log_tick
                try:
                    # Wake on a new line, or look again whether the client went away.
                    await asyncio.wait_for(tick.wait(), 0.2)
                except asyncio.TimeoutError:
                    pass
        except ConnectionError:
            pass
        finally:
            self.log_streams["open"] -= 1
            self.log_streams["closed"] += 1
        return response

    async def create_by_apply(self, request):
        data = dict(request.data or {})
        self.stamp(data, request.namespace, request.name)
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key in self.objects:
                self.objects[key].create(data)
            else:
                self.objects[key] = data
            await self._buses[request.resource].put({"type": "ADDED", "object": self.objects[key].raw})
        return aiohttp.web.json_response(self.objects[key].raw, status=201)

    async def replace(self, request):
        key = (request.resource, request.namespace, request.name)
        if key not in self.objects or self.objects[key].deleted:
            raise k8s.KubernetesObjectNotFoundError()
        data = dict(request.data)
        old = self.objects[key].raw
        if request.subresource == "status":  # only status changes on the status subresource
            data = {**old, "status": data.get("status")}
        data.setdefault("metadata", {}).update({k: old["metadata"][k] for k in ("uid", "creationTimestamp") if k in old.get("metadata", {})})
        self.stamp(data, request.namespace, request.name)
        self.objects[key].create(data)
        await self._buses[request.resource].put({"type": "MODIFIED", "object": self.objects[key].raw})
        return aiohttp.web.json_response(self.objects[key].raw)

    async def delete_collection(self, request):
        gone = []
        for (resource, namespace, name), obj in list(self.objects.items()):
            if resource != request.resource or obj.deleted:
                continue
            if request.namespace is not None and namespace != request.namespace:
                continue
            if selected(obj.raw, request.params):
                raw = obj.raw
                obj.delete()
                gone.append(raw)
                await self._buses[resource].put({"type": "DELETED", "object": raw})
        return aiohttp.web.json_response({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": gone})

    async def _serve_list(self, request):
        # Pages, as the API server serves them: `limit` items, then `metadata.continue` naming
        # where the next page starts (kmock alone ignores `limit` and sends everything at once).
        # The pages of one list come from the snapshot its first page took, as from the API
        # server: filtering every object again for each page made a 10,000-pod relist quadratic.
        token = request.params.get("continue")
        start, version = (int(token.split(":")[0]), token.split(":")[1]) if token else (0, str(next(self.versions)))
        items = self.snapshots.pop(version, None) if token else None
        if items is None:
            listing = await super()._serve_list(request)
            items = [o for o in listing["items"] if selected(o, request.params)]
        listing = {"metadata": {}, "items": items}
        limit = int(request.params.get("limit") or 0)
        if limit > 0:
            listing["items"] = items[start:start + limit]
            if len(items) > start + limit:
                listing["metadata"]["continue"] = f"{start + limit}:{version}"
                self.snapshots[version] = items
                while len(self.snapshots) > 64:  # lists abandoned half-way
                    self.snapshots.pop(next(iter(self.snapshots)))
        listing["metadata"]["resourceVersion"] = version
        if limit > 0:
            # A page is written from each object's JSON kept by its resourceVersion, as the API
            # server's watch cache keeps objects serialized: encoding 10,000 pods again for each
            # relist took the emulator a core for half a second, on the machine it shares with
            # the server it stands in for.
            parts = b",".join(self.encoded(o) for o in listing["items"])
            return (b'{"apiVersion":"v1","kind":"List","metadata":' + json.dumps(listing["metadata"]).encode()
                    + b',"items":[' + parts + b"]}")
        return listing

    def encoded(self, obj):
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if not version:
            return json.dumps(obj).encode()
        hit = self.encodings.get(version)
        if hit is None:
            if len(self.encodings) > 100_000:  # older versions of objects changed since
                self.encodings.clear()
            hit = self.encodings[version] = json.dumps(obj).encode()
        return hit

    async def _serve_watch(self, request):
        since = request.params.get("resourceVersion") or ""
        after = int(since) if since.isdigit() and since != "0" else None
        async for event in super()._serve_watch(request):
            if isinstance(event, dict) and event.get("type") == "EXPIRE":
                if self.to_expire > 0:
                    self.to_expire -= 1
                    yield {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                       "reason": "Expired", "code": 410,
                                                       "message": "too old resource version"}}
                    return
                continue
            # A watch from a resourceVersion gets only what changed after it, as from the API
            # server (kmock replays every object as ADDED: with thousands of pods per watcher,
            # that replay was most of the emulator's work and of its clients').
            if isinstance(event, dict) and event.get("type") == "ADDED" and after is not None:
                version = event.get("object", {}).get("metadata", {}).get("resourceVersion")
                if version and version.isdigit() and int(version) <= after:
                    continue
            if not isinstance(event, dict) or selected(event.get("object", {}), request.params):
                yield event

    # kmock finds the object a request names by scanning every stored object: at 10,000 pods a
    # single PATCH spent tens of milliseconds there before answering. The key finds it at once.
    def _named(self, request):
        key = (request.resource, request.namespace, request.name)
        return self.objects[key] if key in self.objects else None

    async def _serve_fetch(self, request):
        obj = self._named(request)
        if obj is None or obj.deleted:
            raise k8s.KubernetesObjectNotFoundError()
        return obj.raw

    async def _serve_update(self, request):
        return self._named(request).last.raw

    async def _serve_delete(self, request):
        return self._named(request).last.raw

    async def _render_error(self, exc):
        renamed = {"Object Not Found": "NotFound", "Object Already Exists": "AlreadyExists"}
        if isinstance(exc, k8s.KubernetesError) and exc.reason in renamed:
            exc = attrs.evolve(exc, reason=renamed[exc.reason])
        return await super()._render_error(exc)


def real_pod(name, node, i):
    """A pod shaped like a real training or serving pod (~2.9 KB of compact JSON): env,
    volumes, tolerations, owner references, container statuses — what a cache must not keep."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"worker-{i // 8}-7d4b9c", "uid": str(uuid.uuid4()),
             "controller": True, "blockOwnerDeletion": True}
    env = [{"name": f"VAR_{k}", "value": f"value-{k}-{i}"} for k in range(12)]
    env += [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token", "optional": True}}}]
    spec = {"containers": [{"name": "main", "image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5.1-gpu-py311",
                            "command": ["torchrun", "--nproc-per-node", "8", "train.py"], "env": env,
                            "resources": {"limits": {"nvidia.com/gpu": "1", "vpc.amazonaws.com/efa": "4"},
                                          "requests": {"nvidia.com/gpu": "1", "cpu": "90", "memory": "900Gi"}},
                            "volumeMounts": [{"name": "data", "mountPath": "/s3"}, {"name": "shm", "mountPath": "/dev/shm"},
                                             {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "s3-claim"}},
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                        {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "serviceAccountName": "default", "restartPolicy": "Always", "schedulerName": "default-scheduler"}
    if node:
        spec["nodeName"] = node
    running = node is not None
    status = {"phase": "Running" if running else "Pending", "qosClass": "Burstable",
              "conditions": [{"type": t, "status": "True" if running else "False", "lastTransitionTime": "2026-12-01T00:00:00Z"}
                             for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]}
    if running:
        status.update({"hostIP": "10.1.2.3", "podIP": f"10.1.{i // 250 % 250}.{i % 250}",
                       "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "started": True,
                                              "image": spec["containers"][0]["image"], "imageID": "sha256:" + "ab" * 32,
                                              "containerID": "containerd://" + "cd" * 32,
                                              "state": {"running": {"startedAt": "2026-12-01T00:00:00Z"}}}]})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [owner],
                         "labels": {"app": f"worker-{i // 8}", "pod-template-hash": "7d4b9c"},
                         "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-01T00:00:00Z"}},
            "spec": spec, "status": status}


def seed_templates(k8s_emulator):
    """AWS's two workspace templates, where the Spaces add-on installs them."""
    res = kmock.resource("workspace.jupyter.org", "v1alpha1", "workspacetemplates")
    with open(TEMPLATES) as f:
        for data in yaml.safe_load_all(f):
            name = data["metadata"]["name"]
            k8s_emulator.stamp(data, SHARED_TEMPLATES, name)
            k8s_emulator.objects[res, SHARED_TEMPLATES, name] = data


def seed(k8s_emulator, nodes, pods, shape="small"):
    """Pre-loads GPU nodes and pods (a third pending) for the status benchmark."""
    node_res = kmock.resource("", "v1", "nodes")
    pod_res = kmock.resource("", "v1", "pods")
    for i in range(nodes):
        name = f"hyperpod-i-{i:017x}"
        data = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
            "sagemaker.amazonaws.com/instance-group-name": f"gpu-{i % 4}",
            "sagemaker.amazonaws.com/node-health-status": "Schedulable"}},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
        k8s_emulator.stamp(data, None, name)
        k8s_emulator.objects[node_res, None, name] = data
    for i in range(pods):
        name = f"worker-{i}"
        if shape == "real":
            data = real_pod(name, f"hyperpod-i-{i % max(nodes, 1):017x}" if i % 3 else None, i)
            k8s_emulator.stamp(data, "default", name)
            k8s_emulator.objects[pod_res, "default", name] = data
            continue
        spec = {"containers": [{"name": "main", "image": "busybox",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
        if i % 3:
            spec["nodeName"] = f"hyperpod-i-{i % max(nodes, 1):017x}"
        data = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": spec, "status": {"phase": "Running" if i % 3 else "Pending"}}
        k8s_emulator.stamp(data, "default", name)
        k8s_emulator.objects[pod_res, "default", name] = data


async def main():
    args = argparse.ArgumentParser()
    args.add_argument("--seed-nodes", type=int, default=0)
    args.add_argument("--seed-pods", type=int, default=0)
    args.add_argument("--pod-shape", choices=["small", "real"], default="small")
    args.add_argument("--port", type=int, default=None)
    opts = args.parse_args()
    async with Emulator() as emulator:
        for path, (kind, namespaced, subresources) in RESOURCES.items():
            *group, version, plural = path.split("/")
            emulator.resources[path] = kmock.ResourceInfo(
                kind=kind, singular=kind.lower(), namespaced=namespaced,
                verbs={"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
                subresources=set(subresources))
        seed(emulator, opts.seed_nodes, opts.seed_pods, opts.pod_shape)
        seed_templates(emulator)
        async with kmock.Server(emulator, host="127.0.0.1", port=opts.port) as server:
            print(f"READY http://{server.host}:{server.port}", flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
