"""Browser scenarios for the web UI: Debian's chromium, headless, driven by Playwright for Python
(never `playwright install`). Test infrastructure.

Run: python ui_scenarios.py BASE_URL OUT_DIR SCENARIO...
Each scenario saves a screenshot in OUT_DIR; any failed expectation exits non-zero with a message.
"""

import os
import re
import sys

from playwright.sync_api import expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
STAGES = ["cluster", "dependencies", "hyperpod", "storage"]


def fill_create_form(page, base, name, zone="us-west-2a", instance_type="ml.g5.8xlarge", count="2"):
    page.goto(f"{base}/#/create")
    page.get_by_label("Cluster name").fill(name)
    page.get_by_label("Availability Zone").select_option(zone)
    types = page.get_by_label("Accelerated instance type")
    expect(types.locator(f"option[value='{instance_type}']")).to_have_count(1)
    types.select_option(instance_type)
    page.get_by_label("Instance count").fill(count)


def wait_pipeline(page, state="succeeded", timeout=120_000):
    expect(page.locator("#stages")).to_have_attribute("data-state", state, timeout=timeout)


def follow_op(page):
    """After a form starts an operation: its progress page, followed until it succeeds."""
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")


def enable_feature(page, base, feature):
    """Turns a managed feature of ui-demo on through the API, as the browser would, and waits."""
    r = page.request.patch(f"{base}/api/clusters/ui-demo/features", data={feature: True},
                           headers={"X-InstantStart-Actor": "browser"})
    assert r.status == 202, r.text()
    op = r.json()["features"][feature]["operationId"]
    for _ in range(60):
        state = page.request.get(f"{base}/api/operations/{op}?wait=20").json()["state"]
        if state in ("succeeded", "failed", "cancelled"):
            break
    assert state == "succeeded", (feature, state)


def create(page, base, out):
    """Create a cluster through the form and watch every stage reach `succeeded`."""
    page.goto(f"{base}/")
    expect(page.locator("#banner")).to_contain_text("Sandbox mode")
    fill_create_form(page, base, "ui-demo")
    expect(page.locator("#preflight")).to_contain_text("Quota: 2 of")
    page.get_by_role("button", name="Create cluster").click()
    page.wait_for_url("**/#/op/*")
    wait_pipeline(page)
    assert PUSHED, "no operation pushed over the /api/events WebSocket"
    for stage in STAGES:
        expect(page.locator(f"section[data-stage='{stage}'] header .state")).to_have_text("succeeded")
    page.screenshot(path=f"{out}/progress.png", full_page=True)


def slow_header(page, base, out):
    """A form filled while the header still loads keeps what was typed: the page is rendered once,
    not again when the header finishes."""
    slow = page.context.browser.new_page()
    # The header's identity read answers late (as on a loaded server); the form is filled first.
    slow.add_init_script("""
        const send = window.fetch;
        window.fetch = (url, opts) => String(url).includes('/api/aws/identity')
          ? new Promise((done) => setTimeout(done, 1500)).then(() => send(url, opts))
          : send(url, opts);
    """)
    slow.goto(f"{base}/")
    slow.goto(f"{base}/#/create")
    slow.get_by_label("Cluster name").fill("typed-early")
    expect(slow.locator("#identity")).to_contain_text("arn:")
    expect(slow.get_by_label("Cluster name")).to_have_value("typed-early")
    expect(slow.locator("form[aria-label='Create cluster']")).to_have_count(1)
    slow.close()


def bad_input(page, base, out):
    """The server's validation message shows next to the field it names."""
    fill_create_form(page, base, "Bad_Name")
    page.get_by_role("button", name="Create cluster").click()
    expect(page.locator("#name-error")).to_contain_text("not a valid cluster name")
    expect(page.get_by_label("Cluster name")).to_have_attribute("aria-invalid", "true")
    page.screenshot(path=f"{out}/bad-input.png", full_page=True)


def retry(page, base, out):
    """An injected HyperPod failure shows its reason; Retry completes the pipeline."""
    fill_create_form(page, base, "ui-retry")
    page.get_by_role("button", name="Create cluster").click()
    page.wait_for_url("**/#/op/*")
    wait_pipeline(page, "failed")
    hyperpod = page.locator("section[data-stage='hyperpod']")
    expect(hyperpod.locator(".reason")).to_contain_text("sagemaker")
    expect(hyperpod.locator(".plain")).to_contain_text("quota is too low")
    # The failed stage's evidence, in one panel beside it: the stage's error as a finding.
    hyperpod.get_by_role("button", name="evidence of hyperpod").click()
    evidence = page.locator("#evidence-hyperpod")
    expect(evidence.locator(".findings")).to_contain_text("the hyperpod stage failed")
    expect(evidence).to_contain_text("operation_get")
    page.screenshot(path=f"{out}/failed.png", full_page=True)
    page.get_by_role("button", name="Retry hyperpod").click()
    wait_pipeline(page)
    expect(hyperpod.locator("header .state")).to_have_text("succeeded")
    page.screenshot(path=f"{out}/retried.png", full_page=True)


def reload(page, base, out):
    """Reloading mid-pipeline restores the panel from the server."""
    fill_create_form(page, base, "ui-reload")
    page.get_by_role("button", name="Create cluster").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("section[data-stage='cluster'] tbody tr").first).to_be_visible()
    url = page.url
    page.reload()
    assert page.url == url, (page.url, url)
    expect(page.locator("section[data-stage='cluster']")).to_be_visible()
    page.screenshot(path=f"{out}/reloaded.png", full_page=True)
    wait_pipeline(page)


def nodes(page, base, out):
    """The cluster detail and the nodes page list the simulated nodes."""
    page.goto(f"{base}/#/cluster/ui-demo")
    rows = page.locator("h2:has-text('Nodes') + div table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("ml.g5.8xlarge")
    # What it runs beside what it could: Kubernetes, the next minor, each add-on's versions.
    expect(page.locator("#cluster-versions")).to_contain_text("Kubernetes 1.32 (next: 1.33)")
    # Where 1.32 is in EKS's calendar (DescribeClusterVersions), in words.
    expect(page.locator("#cluster-support")).to_contain_text("2026-03-23")
    expect(page.locator("#cluster-versions tbody tr", has_text="vpc-cni")).to_have_count(1)
    expect(page.locator("#cluster-versions tbody tr", has_text="in step")).to_have_count(1)
    page.screenshot(path=f"{out}/cluster.png", full_page=True)
    # The upgrade to the next minor is asked with its plan (previewed: nothing written), then
    # runs as one watched operation: the control plane, then the add-ons.
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    page.get_by_role("button", name="Upgrade to 1.33").click()
    page.wait_for_url("**/#/op/*")
    assert "cluster-upgrade on ui-demo" in asked[0], asked
    assert "kubernetes-version (eks:UpdateClusterVersion)" in asked[0], asked
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/cluster/ui-demo")
    expect(page.locator("#cluster-versions")).to_contain_text("Kubernetes 1.33 (next: 1.34)")
    page.get_by_label("Active cluster").select_option("ui-demo")
    # The pages of a cluster are addressable: their links carry it, and the address opens it.
    expect(page.locator("nav a[data-nav=nodes]")).to_have_attribute("href", "#/nodes?cluster=ui-demo")
    page.goto(f"{base}/#/nodes?cluster=ui-demo")
    expect(page.locator("h2:has-text('Nodes') + div table tbody tr")).to_have_count(2)
    expect(page.locator("nav a[data-nav=nodes]")).to_have_attribute("aria-current", "page")
    page.goto(f"{base}/#/nodes")
    expect(page.locator("h2:has-text('Nodes') + div table tbody tr")).to_have_count(2)
    # "(none)" clears the choice (links stop naming a cluster, the server agrees); choosing
    # the cluster again brings its pages back.
    page.get_by_label("Active cluster").select_option("")
    expect(page.locator("nav a[data-nav=nodes]")).to_have_attribute("href", "#/nodes")
    assert page.evaluate("fetch('/api/active-cluster').then(r => r.json())")["name"] is None
    page.get_by_label("Active cluster").select_option("ui-demo")
    expect(page.locator("nav a[data-nav=nodes]")).to_have_attribute("href", "#/nodes?cluster=ui-demo")
    expect(page.locator("h2:has-text('Nodes') + div table tbody tr")).to_have_count(2)
    # Investigate first: a node's evidence, in one panel, with its lifecycle script's lines.
    first = page.locator("h2:has-text('Nodes') + div table tbody tr").first
    first.get_by_role("button", name="evidence").click()
    panel = page.locator("#node-evidence")
    expect(panel).to_contain_text("Nothing alarming found")
    expect(panel).to_contain_text("LifecycleConfig/")
    expect(panel.locator("pre").first).to_contain_text("[on_create.sh] done")
    page.screenshot(path=f"{out}/node-evidence.png", full_page=True)
    # A node action asks first, with its plan (previewed: nothing written); dismissing does
    # nothing, accepting starts a watched operation.
    reboot = page.locator("h2:has-text('Nodes') + div table tbody tr").first.get_by_role("button", name="reboot")
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    with page.expect_event("dialog"):
        reboot.click()
    assert "node-action on ui-demo" in asked[0], asked
    assert "sagemaker:BatchRebootClusterNodes" in asked[0], asked
    assert "#/nodes" in page.url
    page.once("dialog", lambda d: d.accept())
    reboot.click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/operations")
    page.locator("#f-actor").select_option("browser")
    expect(page.locator("#operations tbody tr").first).to_contain_text("browser")
    # The audit trail shows the reboot the browser asked for, with its operation.
    page.locator("#f-audit-actor").select_option("browser")
    expect(page.locator("#audit tbody tr").first).to_contain_text("POST /api/clusters/")
    expect(page.locator("#audit tbody tr").first.locator("a")).to_be_visible()
    # One cluster's trail: another cluster's name finds nothing, this one's finds the reboot.
    page.locator("#f-audit-cluster").fill("elsewhere")
    page.locator("#f-audit-cluster").dispatch_event("change")
    expect(page.locator("#audit")).to_contain_text("No changes requested yet.")
    page.locator("#f-audit-cluster").fill("ui-demo")
    page.locator("#f-audit-cluster").dispatch_event("change")
    expect(page.locator("#audit tbody tr").first).to_contain_text("POST /api/clusters/ui-demo")
    page.screenshot(path=f"{out}/operations.png", full_page=True)
    # A software update, planned on the page: a bad image is refused by field, a good plan asks
    # first and becomes a watched operation.
    page.goto(f"{base}/#/nodes")
    page.locator("#software-batch").fill("50")
    page.locator("#software-batch-unit").select_option("percent")
    page.locator("#software-wait").fill("60")
    page.locator("#software-image").fill("ami-nothex")
    # Refused by its preview: the error shows and nothing is asked.
    page.get_by_role("button", name="Update software").click()
    expect(page.locator("#software-error")).to_contain_text("neither default nor an AMI ID")
    page.locator("#software-image").fill("default")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Update software").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")


PUSHED = []


def watch_websockets(page, base):
    def opened(ws):
        if ws.url.startswith(base.replace("http", "ws") + "/api/events"):
            ws.on("framereceived", lambda frame: PUSHED.append(frame))
    page.on("websocket", opened)


def features(page, base, out):
    """The features panel sends only changed fields and says so when nothing changes."""
    page.goto(f"{base}/#/features")
    box = page.get_by_label("trainingOperator")
    expect(box).not_to_be_checked()
    page.get_by_role("button", name="Apply changes").click()
    expect(page.locator("#features-result")).to_contain_text("No change")
    box.check()
    page.get_by_role("button", name="Apply changes").click()
    expect(page.locator("#features-result")).to_contain_text("trainingOperator: enabling")
    expect(page.locator("#features-result")).not_to_contain_text("containerInsights")
    # The panel re-reads the cluster after a change: the next apply diffs against it.
    # Managed autoscaling shows which groups it may govern and says it is HyperPod-only.
    expect(page.get_by_text("not general EC2 capacity")).to_be_visible()
    expect(page.locator("#autoscale-workers")).to_be_enabled()
    page.get_by_label("managedAutoscaling").check()
    page.get_by_role("button", name="Apply changes").click()
    expect(page.locator("#features-result")).to_contain_text("managedAutoscaling: enabling")
    expect(page.locator("#features-result")).not_to_contain_text("trainingOperator")
    page.screenshot(path=f"{out}/features.png", full_page=True)


def teams(page, base, out):
    """Governance off is explained; on, the policy and a team are set from the page, a bad team
    name is explained, and the team's share is drawn beside what is free, on the cluster's page
    too."""
    page.goto(f"{base}/#/teams")
    expect(page.get_by_text("Task governance is off")).to_be_visible()
    enable_feature(page, base, "taskGovernance")
    # The same address: reload so the page reads the cluster again.
    page.reload()
    page.get_by_role("button", name="Set policy").click()
    follow_op(page)
    page.goto(f"{base}/#/teams")
    expect(page.get_by_text("training-priority")).to_be_visible()
    page.get_by_text("Give a team its share").click()
    page.get_by_label("Team name").fill("Team_A")
    page.get_by_role("button", name="Create team").click()
    expect(page.locator("#teams-error")).to_contain_text("cannot name a team")
    page.get_by_label("Team name").fill("team-a")
    page.get_by_role("button", name="Create team").click()
    follow_op(page)
    page.goto(f"{base}/#/teams")
    expect(page.locator("#team-shares [data-part=team-a]")).to_have_count(1)
    expect(page.locator("#team-shares .bar-row").first).to_have_attribute("aria-label", re.compile("team-a 1 inst"))
    # Kueue's counts, drawn: team-a's one GPU of quota, idle, and nothing waiting.
    expect(page.locator("#team-usage")).to_contain_text("team-a · ml.g5.8xlarge")
    expect(page.locator("#team-usage")).to_contain_text("1 free")
    expect(page.locator("#team-usage")).to_contain_text("team-a: 0 admitted, 0 pending")
    page.screenshot(path=f"{out}/teams.png", full_page=True)
    # A person is given the team to edit, which the check then says, and it is taken back.
    researcher = "arn:aws:iam::123456789012:role/Researcher"
    page.get_by_text("Who may work as a team").click()
    page.get_by_label("Person").fill(researcher)
    page.get_by_role("button", name="Give access").click()
    follow_op(page)
    expect(page.locator("#stages")).to_contain_text("access-policy")
    page.goto(f"{base}/#/teams")
    page.get_by_text("Who may work as a team").click()
    page.get_by_label("Person").fill(researcher)
    page.get_by_role("button", name="Check").click()
    expect(page.locator("#access-now")).to_have_text(f"{researcher} on team team-a: edit")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Take back").click()
    follow_op(page)
    page.goto(f"{base}/#/teams")
    page.get_by_text("Who may work as a team").click()
    page.get_by_label("Person").fill(researcher)
    page.get_by_role("button", name="Check").click()
    expect(page.locator("#access-now")).to_have_text(f"{researcher} on team team-a: no access")
    # The cluster's page shows the split at a glance.
    page.goto(f"{base}/#/cluster/ui-demo")
    expect(page.locator("#cluster-teams [data-part=team-a]")).to_have_count(1)


def groups(page, base, out):
    """Add an instance group from the account's offerings, then scale it; a bad name is explained."""
    page.goto(f"{base}/#/nodes")
    page.get_by_label("Group name").fill("Bad Name")
    page.get_by_label("Availability Zone", exact=True).select_option("us-west-2a")
    expect(page.locator("#group-type option[value='ml.g5.8xlarge']")).to_have_count(1)
    page.locator("#group-type").select_option("ml.g5.8xlarge")
    page.get_by_role("button", name="Add group").click()
    expect(page.locator("#group-error")).to_contain_text("not a valid instance group name")
    page.get_by_label("Group name").fill("extra")
    page.get_by_role("button", name="Add group").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/nodes")
    page.get_by_label("new count for extra").fill("2")
    page.locator("tr:has-text('extra')").get_by_role("button", name="scale").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.screenshot(path=f"{out}/groups.png", full_page=True)


ACTOR = {"X-InstantStart-Actor": "browser"}


def finished(page, base, r):
    """Follows the operation a REST call started to its end; it must succeed (a 200 says there
    was nothing to change)."""
    if r.status == 200:
        return
    assert r.status == 202, r.text()
    op = r.json()["operationId"]
    for _ in range(60):
        state = page.request.get(f"{base}/api/operations/{op}?wait=20").json()["state"]
        if state in ("succeeded", "failed", "cancelled"):
            break
    assert state == "succeeded", state


def until_admission(page, base, job, state):
    """Reads the job over REST until Kueue's admission says `state` (bounded), so the page is
    loaded after the change rather than raced against it."""
    seen = None
    for _ in range(300):
        seen = page.request.get(f"{base}/api/clusters/ui-demo/training-jobs/{job}").json()
        if (seen.get("admission") or {}).get("state") == state:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"{job} never {state}: {seen}")


def workloads(page, base, out):
    """Download a model, serve it, smoke-test it from the page; a managed endpoint as a team."""
    page.goto(f"{base}/#/models")
    page.get_by_label("Model id").fill("Qwen/Qwen3-0.6B")
    page.get_by_role("button", name="Download").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/models")
    expect(page.locator("#models-list")).to_contain_text("Qwen/Qwen3-0.6B")
    page.goto(f"{base}/#/storage")
    page.get_by_label("Prefix").fill("lifecycle/")
    page.get_by_role("button", name="list s3-claim").click()
    expect(page.locator("#objects")).to_contain_text("lifecycle/on_create.sh")
    page.goto(f"{base}/#/inference")
    page.get_by_label("Name", exact=True).fill("qwen")
    page.get_by_label("Arguments", exact=True).fill("--model /s3/models/Qwen/Qwen3-0.6B")
    # The cluster is shared (the teams scenario ran first): the model runs as a team.
    expect(page.locator("#dep-team")).to_have_value("team-a")
    page.get_by_role("button", name="Deploy", exact=True).click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/inference")
    expect(page.locator("#deployments-list tr:has-text('qwen')")).to_contain_text("team-a")
    page.locator("tr:has-text('qwen')").get_by_role("button", name="invoke").click()
    expect(page.locator("#invoke-answer")).to_contain_text("(sandbox) Say hello")
    page.screenshot(path=f"{out}/inference.png", full_page=True)
    # The deployment's page follows its replicas' logs.
    page.get_by_role("link", name="qwen").click()
    expect(page.locator("#logs-lines")).to_contain_text("Avg generation throughput")
    expect(page.locator("#logs-status")).to_contain_text("following")
    page.goto(f"{base}/#/inference")
    # The managed path: the inference operator (with the FSx CSI driver it needs), then an
    # endpoint with L2 on tiered storage and prefix-aware routing, smoke-tested from the page.
    for feature in ("fsxCsi", "inferenceOperator"):
        enable_feature(page, base, feature)
    page.goto(f"{base}/#/inference")
    page.get_by_label("Endpoint name").fill("qwen-ep")
    page.get_by_label("Model", exact=True).fill("/s3/models/Qwen/Qwen3-0.6B")
    page.locator("#ep-l2").select_option("tieredstorage")
    # The cluster is shared (the teams scenario ran first): the endpoint runs as a team too.
    expect(page.locator("#ep-team")).to_have_value("team-a")
    page.locator("#ep-priority").select_option("inference")
    page.get_by_role("button", name="Deploy endpoint").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/inference")
    row = page.locator("#endpoints-list tr:has-text('qwen-ep')")
    expect(row).to_contain_text("DeploymentComplete")
    expect(row).to_contain_text("prefixaware")
    expect(row).to_contain_text("L2 tieredstorage")
    expect(row).to_contain_text("team-a · inference")
    row.get_by_role("button", name="invoke").click()
    expect(page.locator("#endpoint-answer")).to_contain_text("(sandbox) Say hello")
    page.screenshot(path=f"{out}/endpoints.png", full_page=True)
    # The endpoint's worker outranks qwen on team-a's one GPU: Kueue preempts qwen's pod for it,
    # and qwen's row says so. The endpoint goes, and qwen runs again.
    page.goto(f"{base}/#/inference")
    expect(page.locator("#deployments-list tr:has-text('qwen') [data-admission]")).to_contain_text("1 preempted")
    finished(page, base, page.request.delete(f"{base}/api/clusters/ui-demo/endpoints/qwen-ep", headers=ACTOR))
    page.goto(f"{base}/#/inference")
    expect(page.locator("#deployments-list tr:has-text('qwen') [data-admission]")).to_contain_text("1 admitted")
    # A warm pool in qwen's place: made from the page, a model served from it, its pod assigned
    # from the page; the table shows who serves what, then everything is put back.
    def finish(r):
        finished(page, base, r)
    actor = ACTOR
    finish(page.request.delete(f"{base}/api/clusters/ui-demo/deployments/qwen", headers=actor))
    page.goto(f"{base}/#/inference")
    page.get_by_text("Make a warm pool").click()
    page.get_by_label("Pool name").fill("warm")
    page.get_by_label("Pool size").fill("1")
    expect(page.locator("#pool-team")).to_have_value("team-a")
    page.get_by_role("button", name="Create pool").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    finish(page.request.post(f"{base}/api/clusters/ui-demo/deployments", data={"deploymentName": "m1", "pool": "warm"}, headers=actor))
    page.goto(f"{base}/#/inference")
    pool = page.locator("section[data-pool=warm]")
    expect(pool).to_contain_text("0 assigned")
    pool.get_by_role("combobox").select_option("m1")
    pool.get_by_role("button", name="apply").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/inference")
    expect(page.locator("section[data-pool=warm]")).to_contain_text("1 assigned")
    expect(page.locator("section[data-pool=warm] h3")).to_contain_text("team-a")
    expect(page.locator("#deployments-list tr:has-text('m1')")).to_contain_text("pool warm · 1 pod")
    page.screenshot(path=f"{out}/pools.png", full_page=True)
    finish(page.request.delete(f"{base}/api/clusters/ui-demo/deployments/m1", headers=actor))
    finish(page.request.delete(f"{base}/api/clusters/ui-demo/pools/warm", headers=actor))


def training(page, base, out):
    """Set up MLflow; pick a recipe (the form asks only its inputs), submit as the team the teams
    scenario made at one of its priorities, follow it, read the job's budget and placement,
    follow its logs, see its metrics charted from MLflow; then a job too wide for the team's
    share, and why it is pending; then a job borrowing, preempted when the lender takes its
    share back (and by which job), and running again."""
    page.goto(f"{base}/#/training")
    page.get_by_role("button", name="Set up MLflow").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/training")
    expect(page.locator("#mlflow")).to_contain_text("MLflow Created")
    page.locator("#train-recipe").select_option("pytorch")
    expect(page.get_by_label("Script")).to_be_visible()
    # A Ray recipe has no training-operator budget to set.
    page.locator("#train-recipe").select_option("verl")
    expect(page.get_by_label("Retries (jobMaxRetryCount)")).to_be_hidden()
    page.locator("#train-recipe").select_option("llama-factory")
    expect(page.get_by_label("Script")).to_be_hidden()
    expect(page.get_by_label("Retries (jobMaxRetryCount)")).to_be_visible()
    page.get_by_label("Job name").fill("ui-sft")
    # The cluster is shared (the teams scenario ran first): the job runs as a team.
    expect(page.locator("#train-team")).to_have_value("team-a")
    page.locator("#train-priority").select_option("training")
    page.get_by_label("Model").fill("/etc/models")
    page.get_by_label("Dataset").fill("/s3/datasets/alpaca")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#train-error")).to_contain_text("not a path under /s3")
    page.get_by_label("Model").fill("/s3/models/Qwen/Qwen3-0.6B")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/training")
    row = page.locator("#training-list tr:has-text('ui-sft')")
    expect(row).to_contain_text("succeeded")
    expect(row.get_by_role("meter")).to_have_attribute("aria-label", "restarts 0/3")
    expect(row).to_contain_text("team-a · training")
    row.get_by_role("link", name="ui-sft").click()
    expect(page.get_by_role("heading", name="Conditions")).to_be_visible()
    expect(page.locator("table")).to_contain_text("Completed")
    expect(page.locator("dl")).to_contain_text("/s3/models/Qwen/Qwen3-0.6B")
    expect(page.locator("dl")).to_contain_text("team-a (namespace hyperpod-ns-team-a), priority training")
    # Its logs, followed to the job's end: every rank's progress, searchable, one pod at a time.
    expect(page.locator("#logs-status")).to_contain_text("ended: the job succeeded")
    expect(page.locator("#logs-lines")).to_contain_text("throughput=")
    page.get_by_label("search the log").fill("training complete")
    expect(page.locator("#logs-count")).to_have_text("1 matching")
    page.get_by_label("search the log").fill("")
    page.locator("#logs-pod").select_option("ui-sft-pods-0")
    expect(page.locator("#logs-lines")).not_to_contain_text("rank 1 of")
    # Its throughput and loss, charted from the MLflow run it reported to.
    expect(page.locator("#chart-throughput figcaption")).to_contain_text("latest")
    points = int(page.locator("#chart-throughput svg").get_attribute("data-points"))
    assert points > 10, points
    expect(page.locator("#chart-throughput polyline")).to_have_count(1)
    expect(page.locator("#chart-loss polyline")).to_have_count(1)
    page.screenshot(path=f"{out}/training.png", full_page=True)
    # Why is it pending: two nodes as team-a, whose share is one and which no team lends to,
    # wait first in its queue with what Kueue is missing, on the list and on the job's page.
    page.goto(f"{base}/#/training")
    page.locator("#train-recipe").select_option("llama-factory")
    page.get_by_label("Job name").fill("ui-wide")
    page.get_by_label("Nodes").fill("2")
    page.get_by_label("Model").fill("/s3/models/Qwen/Qwen3-0.6B")
    page.get_by_label("Dataset").fill("/s3/datasets/alpaca")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/#/op/*")
    page.goto(f"{base}/#/training")
    pending = page.locator("#training-list tr:has-text('ui-wide') [data-admission]")
    expect(pending).to_have_attribute("data-admission", "pending")
    expect(pending).to_contain_text("#1 in the queue")
    # What Kueue is missing, said once: as the job's message, which is Kueue's while it waits.
    row = page.locator("#training-list tr:has-text('ui-wide')")
    expect(row).to_contain_text("queued by Kueue: couldn't assign flavors")
    expect(pending).not_to_contain_text("insufficient unused quota")
    page.locator("#training-list").get_by_role("link", name="ui-wide").click()
    expect(page.locator("#job-admission")).to_contain_text("pending")
    page.screenshot(path=f"{out}/training-pending.png", full_page=True)
    # How much is the team's: nothing running, one waiting.
    page.goto(f"{base}/#/teams")
    expect(page.locator("#team-usage")).to_contain_text("team-a: 0 admitted, 1 pending")
    # Borrowing, reclaimed: ui-wide gives way to a long job of team-a, which may borrow a whole
    # share; team-b lends its idle one, so that job runs on two GPUs; team-b's own job takes its
    # GPU back (team-a's job preempted, saying by which job); with that job gone it runs again.
    # Set up over REST, seen on the page.
    jobs = f"{base}/api/clusters/ui-demo/training-jobs"
    finished(page, base, page.request.delete(f"{jobs}/ui-wide", headers=ACTOR))
    teams = f"{base}/api/clusters/ui-demo/teams"
    finished(page, base, page.request.patch(f"{teams}/team-a", data={"sharing": "LendAndBorrow", "borrowLimit": 100},
                                            headers=ACTOR))
    finished(page, base, page.request.post(teams, headers=ACTOR, data={
        "teamName": "team-b", "sharing": "Lend", "resources": [{"instanceType": "ml.g5.8xlarge", "count": 1}]}))

    def submit(name, team, priority, nodes):
        r = page.request.post(jobs, headers=ACTOR, data={
            "jobName": name, "recipe": "llama-factory", "instanceType": "ml.g5.8xlarge", "nodeCount": nodes,
            "model": "/s3/models/Qwen/Qwen3-0.6B", "dataset": "/s3/datasets/alpaca", "team": team,
            "priority": priority, "args": ["--max_steps=10000000"]})
        assert r.status == 202, r.text()
    submit("ui-borrow", "team-a", "training", 2)
    until_admission(page, base, "ui-borrow", "admitted")
    page.goto(f"{base}/#/training")
    borrower = page.locator("#training-list tr:has-text('ui-borrow') [data-admission]")
    expect(borrower).to_have_attribute("data-admission", "admitted")
    submit("ui-b", "team-b", "inference", 1)
    until_admission(page, base, "ui-borrow", "preempted")
    page.goto(f"{base}/#/training")
    expect(borrower).to_have_attribute("data-admission", "preempted")
    expect(borrower).to_contain_text("preempted by ui-b")
    page.screenshot(path=f"{out}/training-preempted.png", full_page=True)
    finished(page, base, page.request.delete(f"{jobs}/ui-b", headers=ACTOR))
    until_admission(page, base, "ui-borrow", "admitted")
    page.goto(f"{base}/#/training")
    expect(borrower).to_have_attribute("data-admission", "admitted")
    finished(page, base, page.request.delete(f"{jobs}/ui-borrow", headers=ACTOR))


def forget(page, base, out):
    """Forgetting a cluster asks first, then drops it from the list and leaves the account alone."""
    page.goto(f"{base}/#/cluster/ui-retry")
    button = page.get_by_role("button", name="Forget cluster")
    page.once("dialog", lambda d: d.dismiss())
    button.click()
    assert "#/cluster/ui-retry" in page.url
    calls = "fetch('/api/sandbox/calls').then(r => r.json())"
    before = page.evaluate(calls)["accepted"]
    page.once("dialog", lambda d: d.accept())
    button.click()
    page.wait_for_url("**/#/op/*")
    wait_pipeline(page)
    page.goto(f"{base}/#/clusters")
    expect(page.locator("a[href='#/cluster/ui-reload']")).to_be_visible()
    expect(page.locator("a[href='#/cluster/ui-retry']")).to_have_count(0)
    after = page.evaluate(calls)["accepted"]
    assert after == before, f"forgetting called the account: {before} -> {after}"


def spaces(page, base, out):
    """Turn spaces on, create a space from the page (as the team the teams scenario made), open
    it through the control plane in a new tab and see its page with /s3, then stop it."""
    for feature in ("ebsCsi", "spaces"):
        enable_feature(page, base, feature)
    # The training page offers a space to prepare what a job reads.
    page.goto(f"{base}/#/training")
    expect(page.locator("#train-space")).to_contain_text("/s3/code/train.py")
    page.locator("#train-space a").click()
    page.wait_for_url("**/#/spaces*")
    page.get_by_label("Space name").fill("ui-lab")
    page.get_by_label("Idle shutdown (minutes)").fill("1440")
    page.get_by_role("button", name="Create space").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/spaces")
    row = page.locator("#spaces-list tr:has-text('ui-lab')")
    expect(row).to_contain_text("running")
    expect(row).to_contain_text("/s3")
    with page.expect_popup() as opened:
        row.get_by_role("button", name="open space ui-lab").click()
    tab = opened.value
    expect(tab.locator("#space")).to_have_text("ui-lab")
    expect(tab.locator("#mounts")).to_contain_text("/s3")
    assert ".spaces.localhost:" in tab.url, tab.url
    tab.close()
    # A remote IDE needs the add-on's remote access, which the control plane does not set up:
    # the page says so, and names the way that works (open).
    row.get_by_label("IDE for space ui-lab").select_option("kiro-remote")
    row.get_by_role("button", name="connect an IDE to space ui-lab").click()
    expect(page.locator("#spaces-error")).to_contain_text("remote access")
    expect(page.locator("#spaces-error")).to_contain_text("space_open")
    page.screenshot(path=f"{out}/spaces.png", full_page=True)
    row.get_by_role("button", name="stop space ui-lab").click()
    page.wait_for_url("**/#/op/*")
    expect(page.locator("#stages")).to_have_attribute("data-state", "succeeded")
    page.goto(f"{base}/#/spaces")
    expect(page.locator("#spaces-list tr:has-text('ui-lab')")).to_contain_text("stopped")


def costs(page, base, out):
    """The costs page of the cluster the scenarios before ran: a bar per day stacked by group,
    then by team, the idle GPUs in their own colour, the prices from the (simulated) AWS Price List,
    and the CSV."""
    page.goto(f"{base}/#/costs")
    chart = page.locator("#costs-chart")
    # A week by default, today included: every day has its slot.
    expect(chart.locator("svg")).to_have_attribute("data-days", "7")
    expect(chart.locator("g.day-bar rect[data-part]").first).to_be_visible()
    expect(page.locator("#costs-total")).to_contain_text("$")
    expect(page.locator("#costs-estimate")).to_contain_text("AWS Price List (us-west-2)")
    expect(page.locator("#costs-estimate")).to_contain_text("ml.g5.8xlarge")
    # By team: the page reads again (and samples again), so idle GPUs have been counted.
    page.locator("#costs-by").get_by_role("link", name="team").click()
    expect(page.locator("#costs-by strong")).to_have_text("team")
    expect(page.locator("#costs-chart .legend")).to_contain_text("idle GPUs")
    expect(page.locator("#costs-chart rect[data-part='idle GPUs']").first).to_be_attached()
    page.screenshot(path=f"{out}/costs.png", full_page=True)
    href = page.locator("#costs-csv").get_attribute("href")
    csv = page.request.get(f"{base}{href}")
    assert csv.ok and csv.headers["content-type"].startswith("text/csv"), csv.headers
    assert csv.text().startswith("day,key,kind,usd,gpu_hours"), csv.text()[:200]


def utilization(page, base, out):
    """GPU utilization drawn from the simulated DCGM series: a line per node on the nodes page,
    each named with its mean, with links to AWS's dashboards in the account's Grafana; the teams
    page has its own view. Before the observability feature the page says how to turn it on."""
    page.goto(f"{base}/#/nodes")
    expect(page.locator("#node-utilization")).to_contain_text("observability")
    enable_feature(page, base, "observability")
    page.goto(f"{base}/#/nodes")
    chart = page.locator("#node-utilization-chart")
    expect(chart.locator("svg")).to_have_attribute("data-lines", re.compile(r"^[1-9]"))
    expect(chart.locator("polyline[data-line]").first).to_be_attached()
    expect(chart.locator(".legend")).to_contain_text("%")
    # The server names the account's Grafana workspace: AWS's dashboards are linked, the
    # cluster's first.
    links = page.locator("#node-utilization-dashboards a")
    expect(links).to_have_count(5)
    expect(links.first).to_have_text("Cluster")
    expect(links.first).to_have_attribute(
        "href", re.compile(r"^https://g-[0-9a-f]{10}\.grafana-workspace\.[a-z0-9-]+\.amazonaws\.com/d/aws-sm-hp-observability-cluster-v1_0\?var-cluster_name="))
    page.screenshot(path=f"{out}/utilization.png", full_page=True)
    page.goto(f"{base}/#/teams")
    expect(page.locator("#team-utilization")).to_be_visible()


def people(page, base, out):
    """Signing in with an AWS identity (a server with --identity iam): the page gives the command,
    a refused token says why, a good one shows the person (and PEOPLE_TEAMS, when set: their teams
    as EKS says), who sees no link to what only an administrator may do, and signs out.
    PEOPLE_TOKEN is a fresh sign-in token, PEOPLE_ARN its person, PEOPLE_DEPLOYMENT the
    deployment."""
    page.goto(f"{base}/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.locator("#sign-in-command")).to_contain_text(
        f"--cluster-name {os.environ['PEOPLE_DEPLOYMENT']}")
    page.locator("#sign-in-token").fill("k8s-aws-v1.bogus")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#sign-in-error")).to_contain_text("base64")
    page.locator("#sign-in-token").fill(os.environ["PEOPLE_TOKEN"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#identity")).to_contain_text(os.environ["PEOPLE_ARN"])
    if os.environ.get("PEOPLE_TEAMS"):
        expect(page.locator("#identity-teams")).to_contain_text(os.environ["PEOPLE_TEAMS"])
    expect(page.locator("nav a[data-nav=create]")).to_be_hidden()
    expect(page.locator("nav a[data-nav=training]")).to_be_visible()
    expect(page.get_by_role("heading", name="Clusters")).to_be_visible()
    page.screenshot(path=f"{out}/signed-in.png", full_page=True)
    if os.environ.get("PEOPLE_TEAM"):
        # Their teams' page shows their team (to submit as) and none of what only the
        # cluster's administrators change; so does the features page.
        page.goto(f"{base}/#/teams")
        expect(page.locator("#view table")).to_contain_text(os.environ["PEOPLE_TEAM"])
        expect(page.get_by_text("Give a team its share")).to_have_count(0)
        expect(page.get_by_text("Who may work as a team")).to_have_count(0)
        expect(page.locator("#view table")).not_to_contain_text(os.environ["PEOPLE_NOT_TEAM"])
        page.goto(f"{base}/#/features")
        expect(page.get_by_role("heading", name=re.compile("Advanced features"))).to_be_visible()
        expect(page.get_by_role("button", name="Apply changes")).to_have_count(0)
    # Their agent tokens: one made (shown once), listed, revoked.
    page.locator("nav a[data-nav=tokens]").click()
    expect(page.get_by_role("heading", name="Agent tokens")).to_be_visible()
    page.locator("#agent-token-name").fill("kiro in the browser")
    page.locator("#agent-token-read-only").check()
    page.get_by_role("button", name="Make token").click()
    expect(page.locator("#agent-token-secret")).to_contain_text("isat_")
    row = page.locator("tr", has_text="kiro in the browser")
    expect(row).to_contain_text("read-only")
    expect(row).to_contain_text("active")
    page.get_by_role("button", name="Revoke kiro in the browser").click()
    expect(page.locator("tr", has_text="kiro in the browser")).to_contain_text("revoked")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


SCENARIOS = {"people": people, "utilization": utilization, "costs": costs, "spaces": spaces, "slow-header": slow_header, "forget": forget, "training": training, "workloads": workloads, "groups": groups, "features": features, "teams": teams, "create": create, "bad-input": bad_input, "retry": retry, "reload": reload, "nodes": nodes}


def main():
    base, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    # The suite runs other tests beside this one on a 2-core machine: be patient, not flaky.
    expect.set_options(timeout=30_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # 4xx answers are expected (validation); Chromium logs each as "Failed to load resource".
        page.on("console", lambda m: errors.append(m.text)
                if m.type == "error" and "Failed to load resource" not in m.text else None)
        watch_websockets(page, base)
        external = []
        page.on("request", lambda r: external.append(r.url) if not r.url.startswith(base) and not r.url.startswith(base.replace("http", "ws")) else None)
        for name in names:
            try:
                SCENARIOS[name](page, base, out)
            except Exception:
                page.screenshot(path=f"{out}/{name}-failure.png", full_page=True)
                raise
            print(f"scenario {name}: ok", flush=True)
        browser.close()
    assert not errors, f"browser errors: {errors}"
    assert not external, f"requests to other hosts: {external}"


if __name__ == "__main__":
    main()
