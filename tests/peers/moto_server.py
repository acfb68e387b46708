"""moto's server plus the EKS add-on and access-entry APIs, SageMaker's MLflow App APIs and the
Price List API, which moto does not emulate.
Test infrastructure.

Run: python moto_server.py -H 127.0.0.1 -p PORT   (same flags as `moto_server`)

Every request goes to moto except EKS add-on calls (SigV4 scope `/eks/`, paths
`/clusters/<c>/addons[/<a>[/update]]`), which are kept in memory here with the response and error
shapes of the EKS REST-JSON protocol. A new add-on reports CREATING on creation and ACTIVE from
the first DescribeAddon on, so a caller has to watch it. `GET /_gapfiller/addons` shows the create
and update requests as received (their `podIdentityAssociations` among them).

SageMaker MLflow App calls (JSON 1.1, `X-Amz-Target: SageMaker.<Op>` for CreateMlflowApp,
DescribeMlflowApp, ListMlflowApps, CreatePresignedMlflowAppUrl) are kept here too: an app reports
Creating on creation and Created from the first describe on. `GET /_gapfiller/mlflow` shows the
create requests as received.

SageMaker task governance (CreateClusterSchedulerConfig, CreateComputeQuota and their Describe,
List, Update and Delete calls) is kept here too, with SageMaker's rules: one scheduler config per
cluster and one quota per team (ConflictException, a predecessor still Deleting included: a deleted
one is listed Deleting once before it is gone), updates naming the current version as
`TargetVersion`; a new or updated resource reports Creating/Updating, then Created/Updated from the
next read on. `GET /_gapfiller/governance` shows the requests as received.

SageMaker `ListClusterEvents` (which moto lacks) is answered here with SageMaker's rule: a
cluster created without `NodeProvisioningMode: Continuous` has no events (ValidationException);
one created with it answers the events `POST /_gapfiller/cluster-events/<cluster>` seeded, newest
first. `CreateCluster` requests are noted (then passed to moto) to know the mode.
`GET /_gapfiller/cluster-events` shows the ListClusterEvents requests as received.

Amazon Managed Service for Prometheus's query API (which moto lacks: it emulates the workspace
control plane only) is answered here: `GET /workspaces/<ws>/api/v1/query_range` signed for `aps`
(an unsigned or otherwise-scoped request is refused 403, as AMP refuses it) answers, as a matrix,
the series `POST /_gapfiller/amp/<ws>` seeded whose labels the query's selector matches
(`label="v"` and `label=~"regex"` matchers; the metric name as `__name__`). `GET /_gapfiller/amp` shows the queries as
received (path, query string and the credential scope of the signature).

Amazon Managed Grafana's `DescribeWorkspace` (moto has no Grafana) is answered here:
`GET /workspaces/<id>` signed for `grafana` answers the workspace `POST /_gapfiller/grafana`
seeded (`{"id", "name", "status"}`), in AMG's REST-JSON shape with its endpoint
`<id>.grafana-workspace.<region>.amazonaws.com`, or ResourceNotFoundException (404). A request
to that path signed for another service goes on (it is AMP's, to moto).

The AWS Price List API (which moto lacks) is answered here: `DescribeServices` and `GetProducts`
(JSON 1.1, `X-Amz-Target: AWSPriceListService.<Op>`) over the products `POST /_gapfiller/pricing`
seeded (Price List documents: `product.attributes`, `terms`), with the API's filter types
(`TERM_MATCH` and `EQUALS` exact, `CONTAINS` a substring, `ANY_OF`/`NONE_OF` comma-separated
values; field `ServiceCode` or an attribute), `MaxResults` and `NextToken`. As AWS, it answers only
a request signed for `pricing` in a region with a Price List endpoint (us-east-1, eu-central-1,
ap-south-1). `GET /_gapfiller/pricing` shows the requests as received (operation, body, scope).

moto names a cluster's nodes `<group>-<n>`; SageMaker names them by EC2 instance id
(`i-` and 17 hex digits). `ListClusterNodes` answers each under an instance id derived from
moto's name, and `DescribeClusterNode` and the `Batch*ClusterNodes` calls are translated back.

SageMaker `ListClusterNodes` is paged here: moto ignores `NextToken` and returns the first page
forever, where SageMaker returns the next `MaxResults` (≤ 100) nodes and no token on the last.

S3's expected-owner check (moto ignores `x-amz-expected-bucket-owner`): a request to a bucket
of another account that names an expected owner is refused 403 AccessDenied, as S3 refuses it
(S3 User Guide, "Verifying bucket ownership with bucket owner condition").
`POST /_gapfiller/s3/foreign/<bucket>` makes a bucket in another account (`111111111111`), so
that its name is taken, as a bucket name taken anywhere in S3 is.

STS `GetCallerIdentity` presigned (a sign-in token's URL, which moto answers as a default user
whatever signed it: it reads the access key from an `Authorization` header only) is answered here
as STS answers it. The SigV4 query signature is checked with the secret moto holds for the access
key (an IAM user's key or an assumed role's credentials, whose session token must be signed too),
over the request as received: the `host` and `x-k8s-aws-id` headers among the signed ones, so a
token made for another deployment header fails (403 SignatureDoesNotMatch), an unknown key is
403 InvalidClientTokenId, and a URL more than 15 minutes past its `X-Amz-Date` is 403 ExpiredToken
(aws-iam-authenticator, pkg/token/token.go at 0221afb8e2a5d14a20a93473edc4c2aa7676ce95: STS honours
a presigned GetCallerIdentity for 15 minutes). With `Accept: application/json` the answer is
STS's JSON shape (`GetCallerIdentityResponse.GetCallerIdentityResult.{Account,Arn,UserId}`, the
struct that file reads), else its XML. `GET /_gapfiller/sign-ins` shows the calls as received.

`GET /_gapfiller/calls` counts every AWS request received, by `service:Operation` (the service
from the SigV4 scope, the operation from `X-Amz-Target`, the query `Action`, or the REST method
and first path segment); `DELETE` resets the counts.
"""

import argparse
import datetime
import hashlib
import hmac
import io
import json
import re
import threading
import time
from urllib.parse import parse_qsl, quote

from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

ADDON_PATH = re.compile(r"^/clusters/([^/]+)/addons(?:/([^/]+))?(/update)?/?$")
ACCESS_PATH = re.compile(r"^/clusters/([^/]+)/access-entries(?:/([^/]+))?(/access-policies)?(?:/([^/]+))?/?$")
# The version EKS picks for an add-on created without one (its default for Kubernetes 1.32);
# HyperPod requires at least v1.18.3 of the VPC CNI.
DEFAULT_VERSIONS = {
    "vpc-cni": "v1.19.2-eksbuild.1",
    "kube-proxy": "v1.32.0-eksbuild.2",
    "coredns": "v1.11.4-eksbuild.2",
    "eks-pod-identity-agent": "v1.3.4-eksbuild.1",
}
ADDONS = {}
# Add-on create and update requests as received (`GET /_gapfiller/addons`).
ADDON_REQUESTS = []
ACCESS = {}
MLFLOW_APPS = {}
MLFLOW_CREATES = []
MLFLOW_TARGETS = ("CreateMlflowApp", "DescribeMlflowApp", "ListMlflowApps", "CreatePresignedMlflowAppUrl")
GOVERNANCE = {"configs": {}, "quotas": {}, "requests": []}
GOVERNANCE_TARGETS = tuple(f"{verb}{noun}" for noun in ("ClusterSchedulerConfig", "ComputeQuota")
                           for verb in ("Create", "Describe", "Update", "Delete")) + (
    "ListClusterSchedulerConfigs", "ListComputeQuotas")
LOCK = threading.Lock()
CONTINUOUS = set()
CLUSTER_EVENTS = {"seeded": {}, "requests": []}


def reply(start_response, status, body, error_type=None):
    headers = [("Content-Type", "application/json")]
    if error_type:
        headers.append(("x-amzn-ErrorType", error_type))
    start_response(status, headers)
    return [json.dumps(body).encode()]


def not_found(start_response, what):
    return reply(start_response, "404 Not Found", {"message": f"No addon: {what}"}, "ResourceNotFoundException")


def addons(environ, start_response, cluster, name, update):
    method = environ["REQUEST_METHOD"]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
    now = time.time()
    with LOCK:
        if method == "POST" and name is None:
            name = body.get("addonName", "")
            if (cluster, name) in ADDONS:
                return reply(start_response, "409 Conflict", {"message": f"Addon already exists: {name}"}, "ResourceInUseException")
            ADDON_REQUESTS.append({"op": "CreateAddon", "cluster": cluster, **body})
            ADDONS[(cluster, name)] = {
                "addonName": name, "clusterName": cluster, "status": "CREATING",
                "addonVersion": body.get("addonVersion") or DEFAULT_VERSIONS.get(name, "v1.0.0-eksbuild.1"),
                "addonArn": f"arn:aws:eks:us-west-2:123456789012:addon/{cluster}/{name}/0",
                "serviceAccountRoleArn": body.get("serviceAccountRoleArn"),
                "configurationValues": body.get("configurationValues"),
                "health": {"issues": []}, "createdAt": now, "modifiedAt": now, "tags": body.get("tags") or {},
            }
            return reply(start_response, "200 OK", {"addon": ADDONS[(cluster, name)]})
        if method == "GET" and name is None:
            names = [n for (c, n) in ADDONS if c == cluster]
            return reply(start_response, "200 OK", {"addons": names})
        addon = ADDONS.get((cluster, name))
        if addon is None:
            return not_found(start_response, name)
        if method == "GET":
            snapshot = dict(addon)
            addon["status"] = "ACTIVE"
            return reply(start_response, "200 OK", {"addon": snapshot})
        if method == "POST" and update:
            ADDON_REQUESTS.append({"op": "UpdateAddon", "cluster": cluster, "addonName": name, **body})
            for key in ("addonVersion", "serviceAccountRoleArn", "configurationValues"):
                if body.get(key) is not None:
                    addon[key] = body[key]
            addon["status"] = "UPDATING"
            addon["modifiedAt"] = now
            return reply(start_response, "200 OK", {"update": {"id": "u-1", "status": "InProgress", "type": "AddonUpdate", "params": [], "createdAt": now, "errors": []}})
        if method == "DELETE":
            del ADDONS[(cluster, name)]
            return reply(start_response, "200 OK", {"addon": {**addon, "status": "DELETING"}})
    return reply(start_response, "405 Method Not Allowed", {"message": "unsupported"}, "InvalidRequestException")


def access_entries(environ, start_response, cluster, principal, policies, policy_arn=None):
    """EKS access entries and their access policies, in the REST-JSON shapes of botocore's eks
    model (CreateAccessEntry, DescribeAccessEntry, AssociateAccessPolicy,
    DisassociateAccessPolicy, ListAssociatedAccessPolicies): an entry keeps the type and groups
    it was made with; a policy is associated once per entry (again: its scope is replaced), a
    namespace scope needs namespaces (InvalidParameterException otherwise); disassociating a
    policy the entry does not have is ResourceNotFoundException."""
    from urllib.parse import unquote, parse_qs
    method = environ["REQUEST_METHOD"]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
    with LOCK:
        if method == "POST" and principal is None:
            principal = body.get("principalArn", "")
            if (cluster, principal) in ACCESS:
                return reply(start_response, "409 Conflict", {"message": "exists"}, "ResourceInUseException")
            ACCESS[(cluster, principal)] = {"clusterName": cluster, "principalArn": principal,
                                            "type": body.get("type") or "STANDARD",
                                            "accessEntryArn": f"arn:aws:eks:us-west-2:123456789012:access-entry/{cluster}/x",
                                            "kubernetesGroups": body.get("kubernetesGroups") or [], "policies": []}
            return reply(start_response, "200 OK", {"accessEntry": ACCESS[(cluster, principal)]})
        entry = ACCESS.get((cluster, unquote(principal or "")))
        if entry is None:
            return reply(start_response, "404 Not Found", {"message": "No access entry"}, "ResourceNotFoundException")
        if method == "POST" and policies:
            scope = body.get("accessScope") or {}
            if scope.get("type") == "namespace" and not scope.get("namespaces"):
                return reply(start_response, "400 Bad Request",
                             {"message": "namespaces are required with a namespace scope"}, "InvalidParameterException")
            entry["policies"] = [p for p in entry["policies"] if p["policyArn"] != body.get("policyArn")]
            associated = {"policyArn": body.get("policyArn"), "accessScope": scope,
                          "associatedAt": time.time(), "modifiedAt": time.time()}
            entry["policies"].append(associated)
            return reply(start_response, "200 OK", {"clusterName": cluster, "principalArn": entry["principalArn"],
                                                    "associatedAccessPolicy": associated})
        if method == "DELETE" and policies and policy_arn:
            wanted = unquote(policy_arn)
            if not any(p["policyArn"] == wanted for p in entry["policies"]):
                return reply(start_response, "404 Not Found", {"message": "No such association"}, "ResourceNotFoundException")
            entry["policies"] = [p for p in entry["policies"] if p["policyArn"] != wanted]
            return reply(start_response, "200 OK", {})
        if method == "GET" and policies:
            query = parse_qs(environ.get("QUERY_STRING", ""))
            start = int(query.get("nextToken", ["0"])[0])
            size = int(query.get("maxResults", ["100"])[0])
            page = entry["policies"][start:start + size]
            answer = {"clusterName": cluster, "principalArn": entry["principalArn"],
                      "associatedAccessPolicies": page}
            if start + size < len(entry["policies"]):
                answer["nextToken"] = str(start + size)
            return reply(start_response, "200 OK", answer)
        if method == "GET":
            view = {k: v for k, v in entry.items() if k != "policies"}
            return reply(start_response, "200 OK", {"accessEntry": view})
    return reply(start_response, "405 Method Not Allowed", {"message": "unsupported"}, "InvalidRequestException")

def mlflow_apps(environ, start_response, operation):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
    now = time.time()

    def error(code, message):
        return reply(start_response, "400 Bad Request", {"__type": code, "message": message})

    with LOCK:
        if operation == "CreateMlflowApp":
            MLFLOW_CREATES.append(body)
            for field in ("Name", "ArtifactStoreUri", "RoleArn"):
                if not body.get(field):
                    return error("ValidationException", f"{field} is required")
            if not body["ArtifactStoreUri"].startswith("s3://"):
                return error("ValidationException", "ArtifactStoreUri must be an S3 URI")
            if any(a["Name"] == body["Name"] for a in MLFLOW_APPS.values()):
                return error("ResourceInUse", f"MLflow app {body['Name']} already exists")
            arn = f"arn:aws:sagemaker:us-west-2:123456789012:mlflow-app/app-{len(MLFLOW_APPS) + 1:06d}"
            MLFLOW_APPS[arn] = {"Arn": arn, "Name": body["Name"], "ArtifactStoreUri": body["ArtifactStoreUri"],
                                "RoleArn": body["RoleArn"], "Status": "Creating", "MlflowVersion": "3.4",
                                "CreationTime": now, "LastModifiedTime": now}
            return reply(start_response, "200 OK", {"Arn": arn})
        if operation == "ListMlflowApps":
            summaries = [{k: a[k] for k in ("Arn", "Name", "Status", "CreationTime", "LastModifiedTime", "MlflowVersion")}
                         for a in MLFLOW_APPS.values()]
            return reply(start_response, "200 OK", {"Summaries": summaries})
        app = MLFLOW_APPS.get(body.get("Arn", ""))
        if app is None:
            return error("ResourceNotFound", f"MLflow app {body.get('Arn')} not found")
        if operation == "DescribeMlflowApp":
            snapshot = dict(app)
            app["Status"] = "Created"
            return reply(start_response, "200 OK", snapshot)
        if app["Status"] != "Created":
            return error("ValidationException", "the app is not created yet")
        token = f"token-{int(now * 1000)}"
        region_host = "us-west-2.experiments.sagemaker.aws"
        return reply(start_response, "200 OK", {"AuthorizedUrl": f"https://{app['Arn'].rsplit('/', 1)[1]}.{region_host}/auth?authToken={token}"})


def governance(environ, start_response, operation):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
    now = time.time()

    def error(code, message):
        return reply(start_response, "400 Bad Request", {"__type": code, "message": message})

    config = operation.endswith("ClusterSchedulerConfig") or operation == "ListClusterSchedulerConfigs"
    store = GOVERNANCE["configs" if config else "quotas"]
    kind = "cluster-scheduler-config" if config else "compute-quota"
    id_key = "ClusterSchedulerConfigId" if config else "ComputeQuotaId"
    version_key = "ClusterSchedulerConfigVersion" if config else "ComputeQuotaVersion"
    with LOCK:
        GOVERNANCE["requests"].append({"operation": operation, "body": body})
        if operation.startswith("Create"):
            for field in ("Name", "ClusterArn") + (("SchedulerConfig",) if config else ("ComputeQuotaConfig", "ComputeQuotaTarget")):
                if not body.get(field):
                    return error("ValidationException", f"{field} is required")
            same = [r for r in store.values() if r["ClusterArn"] == body["ClusterArn"]]
            if config and same:
                return error("ConflictException", "the cluster already has a scheduler config")
            team = (body.get("ComputeQuotaTarget") or {}).get("TeamName")
            if not config and any(r["ComputeQuotaTarget"]["TeamName"] == team for r in same):
                return error("ConflictException", f"team {team} already has a compute quota")
            rid = f"{'csc' if config else 'cq'}-{len(store) + 1:08d}"
            arn = f"arn:aws:sagemaker:us-west-2:123456789012:{kind}/{rid}"
            store[rid] = dict(body, **{id_key: rid, f"{'ClusterSchedulerConfig' if config else 'ComputeQuota'}Arn": arn,
                                       version_key: 1, "Status": "Creating", "CreationTime": now})
            return reply(start_response, "200 OK", {id_key: rid, f"{'ClusterSchedulerConfig' if config else 'ComputeQuota'}Arn": arn})
        if operation.startswith("List"):
            for rid, r in list(store.items()):
                if r["Status"] == "Deleting":
                    if r["DeletingReads"] <= 0:
                        del store[rid]
                    r["DeletingReads"] -= 1
            rows = [r for r in store.values() if r["ClusterArn"] == body.get("ClusterArn", r["ClusterArn"])]
            out = []
            for r in rows:
                out.append(dict(r))
                r["Status"] = {"Creating": "Created", "Updating": "Updated"}.get(r["Status"], r["Status"])
            key = "ClusterSchedulerConfigSummaries" if config else "ComputeQuotaSummaries"
            if config:
                out = [{k: r[k] for k in ("ClusterSchedulerConfigArn", "ClusterSchedulerConfigId", "ClusterSchedulerConfigVersion",
                                          "Name", "CreationTime", "Status", "ClusterArn")} for r in out]
            return reply(start_response, "200 OK", {key: out})
        row = store.get(body.get(id_key, ""))
        if row is None:
            return error("ResourceNotFound", f"{body.get(id_key)} not found")
        if operation.startswith("Describe"):
            snapshot = dict(row)
            row["Status"] = {"Creating": "Created", "Updating": "Updated"}.get(row["Status"], row["Status"])
            return reply(start_response, "200 OK", snapshot)
        if operation.startswith("Delete"):
            # SageMaker lists a deleted config or quota as Deleting before it is gone, and
            # refuses a create meanwhile (the Create branch above counts it): one read sees
            # Deleting, the next finds it gone.
            if row["Status"] != "Deleting":
                row["Status"] = "Deleting"
                row["DeletingReads"] = 1
            return reply(start_response, "200 OK", {})
        if body.get("TargetVersion") != row[version_key]:
            return error("ConflictException", f"TargetVersion must be {row[version_key]}")
        for field in ("SchedulerConfig", "ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState"):
            if field in body:
                row[field] = body[field]
        row[version_key] += 1
        row["Status"] = "Updating"
        return reply(start_response, "200 OK", {version_key: row[version_key]})


CALLS = {}


def count_call(environ):
    """Counts one request by `service:Operation`; keeps a form body readable for moto."""
    import io
    from urllib.parse import parse_qs

    scope = re.search(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request", environ.get("HTTP_AUTHORIZATION", ""))
    service = scope.group(1) if scope else "unsigned"
    operation = environ.get("HTTP_X_AMZ_TARGET", "").rsplit(".", 1)[-1]
    if not operation:
        operation = (parse_qs(environ.get("QUERY_STRING", "")).get("Action") or [""])[0]
    if not operation and "form-urlencoded" in environ.get("CONTENT_TYPE", ""):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)
        operation = (parse_qs(body.decode("utf-8", "replace")).get("Action") or [""])[0]
    if not operation:
        first = environ.get("PATH_INFO", "/").strip("/").split("/")[0]
        operation = f"{environ.get('REQUEST_METHOD', 'GET')} /{first}"
    key = f"{service}:{operation}"
    with LOCK:
        CALLS[key] = CALLS.get(key, 0) + 1


NODE_IDS = {}


def instance_id(moto_id):
    """The EC2-style id a moto node is shown under (stable for its name)."""
    import hashlib
    iid = "i-0" + hashlib.sha1(moto_id.encode()).hexdigest()[:16]
    with LOCK:
        NODE_IDS[iid] = moto_id
    return iid


def translate_node_ids(environ):
    """Rewrites instance ids in a node call's body to moto's names (NodeId, NodeIds)."""
    body = read_json(environ)
    with LOCK:
        if "NodeId" in body:
            body["NodeId"] = NODE_IDS.get(body["NodeId"], body["NodeId"])
        if "NodeIds" in body:
            body["NodeIds"] = [NODE_IDS.get(n, n) for n in body["NodeIds"]]
    raw = json.dumps(body).encode()
    environ["wsgi.input"] = io.BytesIO(raw)
    environ["CONTENT_LENGTH"] = str(len(raw))


def answered_with_instance_ids(moto, environ, start_response):
    """Passes a call to moto and shows its node names as instance ids."""
    seen = {}

    def capture(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, headers

    raw = b"".join(moto(environ, capture))
    if not seen["status"].startswith("200"):
        start_response(seen["status"], seen["headers"])
        return [raw]
    body = json.loads(raw or b"{}")
    details = body.get("NodeDetails")
    if details and "InstanceId" in details:
        details["InstanceId"] = instance_id(details["InstanceId"])
    return reply(start_response, "200 OK", body)


def list_cluster_nodes(moto, environ, start_response):
    """Pages moto's full node list by offset tokens, as SageMaker pages it."""
    import base64
    import io

    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.loads(environ["wsgi.input"].read(length) or b"{}")
    size = max(1, min(int(body.pop("MaxResults", 100)), 100))
    token = body.pop("NextToken", None)
    try:
        start = int(base64.b64decode(token).decode()) if token else 0
    except ValueError:
        return reply(start_response, "400 Bad Request", {"message": "invalid NextToken"}, "ValidationException")
    body["MaxResults"] = 100000
    raw = json.dumps(body).encode()
    inner = dict(environ, **{"wsgi.input": io.BytesIO(raw), "CONTENT_LENGTH": str(len(raw))})
    seen = {}

    def capture(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, headers

    raw = b"".join(moto(inner, capture))
    if not seen["status"].startswith("200"):
        start_response(seen["status"], seen["headers"])
        return [raw]
    nodes = json.loads(raw or b"{}").get("ClusterNodeSummaries", [])
    for n in nodes:
        n["InstanceId"] = instance_id(n["InstanceId"])
    page = {"ClusterNodeSummaries": nodes[start:start + size]}
    if start + size < len(nodes):
        page["NextToken"] = base64.b64encode(str(start + size).encode()).decode()
    return reply(start_response, "200 OK", page)


def read_json(environ, empty=b"{}"):
    """The request's JSON body (read once: the stream is consumed)."""
    return json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)) or empty)


def cluster_events(environ, start_response):
    """ListClusterEvents with SageMaker's rule: events only under continuous provisioning."""
    body = read_json(environ)
    with LOCK:
        CLUSTER_EVENTS["requests"].append(body)
        name = body.get("ClusterName", "")
        if name not in CONTINUOUS:
            return reply(start_response, "400 Bad Request",
                         {"__type": "ValidationException",
                          "message": "Cluster events are only available for clusters with NodeProvisioningMode set to Continuous"},
                         "ValidationException")
        events = [e for e in CLUSTER_EVENTS["seeded"].get(name, [])
                  if not body.get("NodeId") or e.get("InstanceId") == body["NodeId"]]
        events.sort(key=lambda e: e["EventTime"], reverse=body.get("SortOrder") != "Ascending")
        return reply(start_response, "200 OK", {"Events": events[: body.get("MaxResults", 100)]})


GRAFANA_PATH = re.compile(r"^/workspaces/(g-[0-9a-f]{10})/?$")
GRAFANA = {}


def grafana_workspace(environ, start_response, workspace_id):
    """AMG's DescribeWorkspace over the seeded workspaces."""
    if environ["REQUEST_METHOD"] != "GET":
        return reply(start_response, "405 Method Not Allowed", {"message": "unsupported"}, "ValidationException")
    with LOCK:
        w = GRAFANA.get(workspace_id)
    if w is None:
        return reply(start_response, "404 Not Found",
                     {"message": f"Workspace {workspace_id} not found", "resourceId": workspace_id,
                      "resourceType": "WORKSPACE"}, "ResourceNotFoundException")
    now = time.time()
    return reply(start_response, "200 OK", {"workspace": {
        "id": workspace_id, "name": w.get("name"), "status": w.get("status", "ACTIVE"),
        "endpoint": f"{workspace_id}.grafana-workspace.us-west-2.amazonaws.com",
        "authentication": {"providers": ["AWS_SSO"]}, "dataSources": ["PROMETHEUS"],
        "grafanaVersion": "10.4", "created": now, "modified": now,
        "accountAccessType": "CURRENT_ACCOUNT", "permissionType": "CUSTOMER_MANAGED"}})


AMP_QUERY = re.compile(r"^/workspaces/([^/]+)/api/v1/query_range/?$")
AMP = {"seeded": {}, "queries": []}


def amp_query(environ, start_response, workspace):
    """The Prometheus HTTP API's range query over the seeded series of one workspace."""
    from urllib.parse import parse_qs
    auth = environ.get("HTTP_AUTHORIZATION", "")
    scope = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request", auth)
    query = parse_qs(environ.get("QUERY_STRING", ""))
    with LOCK:
        AMP["queries"].append({"workspace": workspace, "query": query,
                               "scope": list(scope.groups()) if scope else None})
    if not scope or scope.group(2) != "aps":
        return reply(start_response, "403 Forbidden", {"message": "Missing Authentication Token"})
    expr = query.get("query", [""])[0]
    match = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?$", expr.strip())
    if not match or not all(k in query for k in ("start", "end", "step")):
        return reply(start_response, "400 Bad Request",
                     {"status": "error", "errorType": "bad_data", "error": f"cannot parse {expr!r}"})
    # Matchers `label="v"` and `label=~"re"` (fully anchored, as PromQL's are).
    wanted = [("__name__", False, match.group(1))]
    for m in filter(None, (x.strip() for x in (match.group(2) or "").split(","))):
        label, _, value = m.partition("=")
        regex = value.startswith("~")
        wanted.append((label.strip(), regex, value.lstrip("~").strip().strip('"')))

    def selected(metric):
        return all(re.fullmatch(v, metric.get(k, "")) if regex else metric.get(k) == v
                   for k, regex, v in wanted)
    start, end = float(query["start"][0]), float(query["end"][0])
    with LOCK:
        seeded = AMP["seeded"].get(workspace, [])
    result = [{"metric": s["metric"], "values": [v for v in s["values"] if start <= v[0] <= end]}
              for s in seeded if selected(s["metric"])]
    return reply(start_response, "200 OK",
                 {"status": "success", "data": {"resultType": "matrix", "result": result}})


PRICING = {"products": [], "requests": []}
PRICE_LIST_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1", "cn-northwest-1")


def price_list(environ, start_response, operation):
    """The Price List API's DescribeServices and GetProducts over the seeded products."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    scope = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request", auth)
    body = read_json(environ)
    with LOCK:
        PRICING["requests"].append({"operation": operation, "body": body,
                                    "scope": list(scope.groups()) if scope else None})
        products = list(PRICING["products"])

    def error(code, message):
        return reply(start_response, "400 Bad Request", {"__type": code, "Message": message}, code)
    if not scope or scope.group(2) != "pricing" or scope.group(1) not in PRICE_LIST_REGIONS:
        return error("UnrecognizedClientException", "The Price List API has no endpoint in this region")
    if body.get("FormatVersion", "aws_v1") != "aws_v1":
        return error("InvalidParameterException", "FormatVersion must be aws_v1")
    code = body.get("ServiceCode")
    mine = [p for p in products if p.get("serviceCode") == code]
    if operation == "DescribeServices":
        names = sorted({a for p in mine for a in p["product"]["attributes"]})
        services = [{"ServiceCode": code, "AttributeNames": names}] if mine else []
        return reply(start_response, "200 OK", {"Services": services, "FormatVersion": "aws_v1"})
    if operation != "GetProducts":
        return error("InvalidParameterException", f"{operation} is not emulated")
    if not code:
        return error("InvalidParameterException", "ServiceCode is required")

    def passes(p, f):
        field, value = f.get("Field"), f.get("Value", "")
        actual = code if field == "ServiceCode" else p["product"]["attributes"].get(field)
        kind = f.get("Type")
        if kind in ("TERM_MATCH", "EQUALS"):
            return actual == value
        if kind == "CONTAINS":
            return actual is not None and value in actual
        if kind == "ANY_OF":
            return actual in [v.strip() for v in value.split(",")]
        if kind == "NONE_OF":
            return actual not in [v.strip() for v in value.split(",")]
        raise ValueError(kind)
    try:
        matched = [p for p in mine if all(passes(p, f) for f in body.get("Filters", []))]
    except ValueError as e:
        return error("InvalidParameterException", f"Unknown filter type {e}")
    size = int(body.get("MaxResults", 100))
    if not 1 <= size <= 100:
        return error("InvalidParameterException", "MaxResults must be between 1 and 100")
    start = int(body.get("NextToken") or 0)
    out = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in matched[start:start + size]]}
    if start + size < len(matched):
        out["NextToken"] = str(start + size)
    return reply(start_response, "200 OK", out)


FOREIGN_ACCOUNT = "111111111111"


def foreign_bucket(start_response, bucket):
    from moto.s3.models import s3_backends
    s3_backends[FOREIGN_ACCOUNT]["aws"].create_bucket(bucket, "us-east-1")
    return reply(start_response, "200 OK", {"bucket": bucket, "owner": FOREIGN_ACCOUNT})


def expected_owner_refused(environ, start_response):
    """S3's answer to a request whose `x-amz-expected-bucket-owner` is not the bucket's owner
    (path-style requests, as the adapter sends them to an endpoint of its own); None otherwise."""
    expected = environ.get("HTTP_X_AMZ_EXPECTED_BUCKET_OWNER")
    if not expected or "/s3/aws4_request" not in environ.get("HTTP_AUTHORIZATION", ""):
        return None
    from moto.s3.models import s3_backends
    bucket = environ.get("PATH_INFO", "").lstrip("/").split("/", 1)[0]
    owner = s3_backends.bucket_accounts.get(bucket)
    if owner is None or owner[1] == expected:
        return None
    body = b"" if environ.get("REQUEST_METHOD") == "HEAD" else (
        b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code>"
        b"<Message>Access Denied</Message></Error>")
    start_response("403 Forbidden", [("Content-Type", "application/xml"),
                                      ("Content-Length", str(len(body)))])
    return [body]


SIGN_INS = []


def sts_error(start_response, code, message):
    body = json.dumps({"Error": {"Type": "Sender", "Code": code, "Message": message},
                       "RequestId": "gapfiller"}).encode()
    start_response("403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def presigned_secret(access_key_id):
    """The secret (and session token, for a role session) moto holds for an access key, and the
    caller it stands for: (secret, token, arn, user_id, account), or None."""
    from moto.iam.models import iam_backends
    from moto.sts.models import sts_backends
    for account in list(sts_backends.keys()):
        role = sts_backends[account]["aws"].get_assumed_role_from_access_key(access_key_id)
        if role is not None:
            return role.secret_access_key, role.session_token, role.arn, role.user_id, role.account_id
    for account in list(iam_backends.keys()):
        iam = iam_backends[account]["aws"]
        user = iam.get_user_from_access_key_id(access_key_id)
        if user is not None:
            key = next(k for k in iam.list_access_keys(user.name) if k.access_key_id == access_key_id)
            return key.secret_access_key, None, user.arn, user.id, user.account_id
    return None


def presigned_identity(environ, start_response):
    raw_query = environ.get("QUERY_STRING", "")
    pairs = parse_qsl(raw_query, keep_blank_values=True)
    params = dict(pairs)
    host = environ.get("HTTP_HOST", "")
    with LOCK:
        SIGN_INS.append({"host": host, "query": raw_query,
                         "k8sAwsId": environ.get("HTTP_X_K8S_AWS_ID"), "accept": environ.get("HTTP_ACCEPT")})
    credential = params.get("X-Amz-Credential", "")
    parts = credential.split("/")
    if len(parts) != 5:
        return sts_error(start_response, "IncompleteSignature", "malformed credential")
    access_key_id, day, region, service, _ = parts
    found = presigned_secret(access_key_id)
    if found is None:
        return sts_error(start_response, "InvalidClientTokenId",
                         "The security token included in the request is invalid.")
    secret, session_token, arn, user_id, account = found
    if session_token is not None and params.get("X-Amz-Security-Token") != session_token:
        return sts_error(start_response, "InvalidClientTokenId",
                         "The security token included in the request is invalid.")
    amz_date = params.get("X-Amz-Date", "")
    try:
        signed_at = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return sts_error(start_response, "IncompleteSignature", "malformed X-Amz-Date")
    if datetime.datetime.now(datetime.timezone.utc) > signed_at + datetime.timedelta(minutes=15):
        return sts_error(start_response, "ExpiredToken", "Request has expired.")
    # SigV4 over the request as received (docs: "Create a canonical request for Signature
    # Version 4"). A presigned STS GET hashes its empty payload; UNSIGNED-PAYLOAD is S3's (it
    # would not reproduce botocore's presigned STS URLs: tests/api/aws.rs, KNOWN_TOKEN).
    signed_headers = params.get("X-Amz-SignedHeaders", "").split(";")
    header_values = {"host": host}
    for h in signed_headers:
        if h != "host":
            header_values[h] = environ.get("HTTP_" + h.upper().replace("-", "_"), "")
    canonical_headers = "".join(f"{h}:{header_values.get(h, '').strip()}\n" for h in signed_headers)
    canonical_query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
        for k, v in sorted(pairs) if k != "X-Amz-Signature")
    canonical = "\n".join(["GET", "/", canonical_query, canonical_headers,
                           ";".join(signed_headers), hashlib.sha256(b"").hexdigest()])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, params.get("X-Amz-Signature", "")):
        return sts_error(start_response, "SignatureDoesNotMatch",
                         "The request signature we calculated does not match the signature you provided.")
    if "application/json" in environ.get("HTTP_ACCEPT", ""):
        return reply(start_response, "200 OK", {"GetCallerIdentityResponse": {
            "GetCallerIdentityResult": {"Account": account, "Arn": arn, "UserId": user_id},
            "ResponseMetadata": {"RequestId": "gapfiller"}}})
    body = (f"<GetCallerIdentityResponse><GetCallerIdentityResult><Arn>{arn}</Arn>"
            f"<UserId>{user_id}</UserId><Account>{account}</Account></GetCallerIdentityResult>"
            "</GetCallerIdentityResponse>").encode()
    start_response("200 OK", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))])
    return [body]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    moto = DomainDispatcherApplication(create_backend_app)

    def app(environ, start_response):
        if environ.get("PATH_INFO") == "/_gapfiller/calls":
            with LOCK:
                if environ.get("REQUEST_METHOD") == "DELETE":
                    CALLS.clear()
                return reply(start_response, "200 OK", dict(CALLS))
        if not environ.get("PATH_INFO", "").startswith("/moto-api"):
            count_call(environ)
        if environ.get("PATH_INFO") == "/_gapfiller/sign-ins":
            with LOCK:
                return reply(start_response, "200 OK", {"requests": SIGN_INS})
        query = environ.get("QUERY_STRING", "")
        if (environ.get("REQUEST_METHOD") == "GET" and "Action=GetCallerIdentity" in query
                and "X-Amz-Signature=" in query and not environ.get("HTTP_AUTHORIZATION")):
            return presigned_identity(environ, start_response)
        if environ.get("PATH_INFO") == "/_gapfiller/mlflow":
            with LOCK:
                return reply(start_response, "200 OK", {"creates": MLFLOW_CREATES})
        if environ.get("PATH_INFO") == "/_gapfiller/addons":
            with LOCK:
                return reply(start_response, "200 OK", {"requests": ADDON_REQUESTS})
        if environ.get("PATH_INFO") == "/_gapfiller/cluster-events":
            with LOCK:
                return reply(start_response, "200 OK", CLUSTER_EVENTS)
        if environ.get("PATH_INFO", "").startswith("/_gapfiller/cluster-events/"):
            name = environ["PATH_INFO"].rsplit("/", 1)[1]
            seeded = read_json(environ, b"[]")
            with LOCK:
                CLUSTER_EVENTS["seeded"][name] = seeded
                CONTINUOUS.add(name)
            return reply(start_response, "200 OK", {"seeded": len(seeded)})
        if environ.get("PATH_INFO", "").startswith("/_gapfiller/s3/foreign/"):
            return foreign_bucket(start_response, environ["PATH_INFO"].rsplit("/", 1)[1])
        refused = expected_owner_refused(environ, start_response)
        if refused is not None:
            return refused
        if environ.get("PATH_INFO") == "/_gapfiller/amp":
            with LOCK:
                return reply(start_response, "200 OK", {"queries": AMP["queries"]})
        if environ.get("PATH_INFO", "").startswith("/_gapfiller/amp/"):
            workspace = environ["PATH_INFO"].rsplit("/", 1)[1]
            seeded = read_json(environ, b"[]")
            with LOCK:
                AMP["seeded"][workspace] = seeded
            return reply(start_response, "200 OK", {"seeded": len(seeded)})
        if environ.get("PATH_INFO") == "/_gapfiller/grafana":
            seeded = read_json(environ, b"{}")
            with LOCK:
                GRAFANA[seeded["id"]] = seeded
            return reply(start_response, "200 OK", {"seeded": seeded["id"]})
        grafana = GRAFANA_PATH.match(environ.get("PATH_INFO", ""))
        if grafana and "/grafana/aws4_request" in environ.get("HTTP_AUTHORIZATION", ""):
            return grafana_workspace(environ, start_response, grafana.group(1))
        amp = AMP_QUERY.match(environ.get("PATH_INFO", ""))
        if amp:
            return amp_query(environ, start_response, amp.group(1))
        if environ.get("PATH_INFO") == "/_gapfiller/pricing":
            with LOCK:
                if environ.get("REQUEST_METHOD") == "POST":
                    PRICING["products"] = read_json(environ, b"[]")
                return reply(start_response, "200 OK", {"requests": PRICING["requests"],
                                                        "products": len(PRICING["products"])})
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("AWSPriceListService."):
            return price_list(environ, start_response, environ["HTTP_X_AMZ_TARGET"].split(".", 1)[1])
        if environ.get("PATH_INFO") == "/_gapfiller/governance":
            with LOCK:
                return reply(start_response, "200 OK", GOVERNANCE)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target.startswith("SageMaker.") and target.split(".", 1)[1] in GOVERNANCE_TARGETS:
            return governance(environ, start_response, target.split(".", 1)[1])
        if target == "SageMaker.ListClusterEvents":
            return cluster_events(environ, start_response)
        if target == "SageMaker.CreateCluster":
            raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            request = json.loads(raw or b"{}")
            if request.get("NodeProvisioningMode") == "Continuous":
                with LOCK:
                    CONTINUOUS.add(request.get("ClusterName"))
            environ["wsgi.input"] = io.BytesIO(raw)
        if target in ("SageMaker.DescribeClusterNode", "SageMaker.BatchRebootClusterNodes",
                      "SageMaker.BatchReplaceClusterNodes", "SageMaker.BatchDeleteClusterNodes"):
            translate_node_ids(environ)
            if target == "SageMaker.DescribeClusterNode":
                return answered_with_instance_ids(moto, environ, start_response)
        if target == "SageMaker.ListClusterNodes":
            return list_cluster_nodes(moto, environ, start_response)
        if target.startswith("SageMaker.") and target.split(".", 1)[1] in MLFLOW_TARGETS:
            return mlflow_apps(environ, start_response, target.split(".", 1)[1])
        match = ADDON_PATH.match(environ.get("PATH_INFO", ""))
        eks = "/eks/aws4_request" in environ.get("HTTP_AUTHORIZATION", "")
        if match and eks:
            return addons(environ, start_response, *match.groups())
        # The principal ARN is percent-encoded in the path (it contains `/`): match the raw URI.
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "")
        access = ACCESS_PATH.match(raw.split("?")[0])
        if access and eks:
            return access_entries(environ, start_response, *access.groups())
        return moto(environ, start_response)

    run_simple(args.host, args.port, app, threaded=True)


if __name__ == "__main__":
    main()
