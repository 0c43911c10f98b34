"""The operators' page in a real Airflow: `airflow standalone` on loopback with an
admin and a viewer, the page in headless Chromium (Debian's, driven by
Playwright): charts, the prefilled rescale form, a preview then an apply that
starts an `elastic_rescale` run through Airflow's REST API as the user, a viewer
who cannot rescale, Data Docs styled with every non-loopback request blocked and
sandboxed away from Airflow's origin, and anonymous calls refused; a second API
server on the same Airflow whose auth manager refuses one user the job's DAGs."""

import json
import os
import re
import signal
import subprocess
import time
import uuid
from urllib.parse import urlparse

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.config import parse_properties, validate
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.local.broker import free_port
from elasticity.local.standalone import BIN, AirflowStandalone
from elasticity.quality.runner import run_quality
from elasticity.spark.engine import MicroBatchEngine
from tests.conftest import REPO
from tests.support.airflow_runs import finished, wait_for
from tests.support.helpers import fresh_topic, job_props, write_properties
from tests.support.per_dag_auth import DENIED_DAGS, DENIED_USER

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OUTPUT = REPO / "test-output"
SCHEDULE = "0 8 * * * -> 3; 0 20 * * * -> 2"  # never the current factor 4: the hold always shows


@pytest.fixture(scope="module")
def job(spark, kafka_bootstrap, tmp_path_factory):
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = kafka_bootstrap
    tmp = tmp_path_factory.mktemp("ui")
    topic = fresh_topic(kafka_bootstrap, "ui", 2, records=500, seed=31)
    name = f"ui{uuid.uuid4().hex[:6]}"
    props = job_props(
        name,
        topic,
        tmp,
        **{
            "job.elasticity.schedule": SCHEDULE,
            # the micro-batch DAG runs once when Airflow first sees it (nothing to read) and then on the last test's
            # trigger only: a scheduled run against the dead engine would retry for minutes with max_active_runs=1,
            # holding that trigger back
            "airflow.microbatch.trigger": "schedule",
            "airflow.microbatch.schedule": "@once",
            "app.class": "elasticity.apps.enrichment:build_stateful",  # the demo's app: a store
            "task.checkpoint.read.versions": "2,1",
            "stores.totals.backup.factories": "blobstore",
            "blob.store.uri": str(tmp / "blobs"),
            "job.state.dir": str(tmp / "state"),
        },
    )
    (tmp / "jobs").mkdir()
    write_properties(tmp / "jobs" / f"{name}.properties", props)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=200)
    JobCoordinator(config, engine.store, engine.inputs).rescale(4)  # a person's rescale: holds against the schedule
    send(kafka_bootstrap, topic, demo_records(100, keys=20, seed=32))
    engine.run(until_caught_up=True)
    result, _ = run_quality(config, engine.store, KafkaInputs(config), incremental=True, run_name="manual__ui_test")
    assert result.success
    return name, tmp, engine.coordinator.current()


DEAD_ENGINE = f"127.0.0.1:{free_port()}"  # spark_default points at a Connect server that is down


@pytest.fixture(scope="module")
def airflow(job, kafka_bootstrap, tmp_path_factory):
    _, tmp, _ = job
    host, port = DEAD_ENGINE.split(":")
    af = AirflowStandalone(
        tmp_path_factory.mktemp("airflow-standalone"),
        free_port(),
        {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"admin:admin,viewer:viewer,{OUTSIDER}:viewer",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "ELASTICITY_JOBS_DIR": str(tmp / "jobs"),
            "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark_connect", "host": f"sc://{host}", "port": int(port)}),
        },
    )
    assert str(af.env()["AIRFLOW__CORE__PLUGINS_FOLDER"]).startswith(str(REPO))  # this checkout's plugin and DAGs
    af.start()
    try:
        af.wait_ready()
        api = af.api()
        api.wait_dag("elastic_rescale")
        yield af, api
    finally:
        af.stop()


def token(af: AirflowStandalone, user: str, base: str | None = None) -> str:
    """`user`'s token from the API server at `base` (None: the standalone's)."""
    password = json.loads(af.password_file.read_text())[user]
    r = requests.post(f"{base or af.base}/auth/token", json={"username": user, "password": password}, timeout=30)
    r.raise_for_status()
    return r.json()["access_token"]


OUTSIDER = "outsider"  # a viewer the per-DAG auth manager refuses the job's DAGs
PER_DAG_AUTH = "tests.support.per_dag_auth.PerDagAuthManager"


@pytest.fixture(scope="module")
def per_dag(job, airflow):
    """A second API server on the same Airflow (home, database, passwords) whose auth manager refuses OUTSIDER
    every DAG of the job: `airflow standalone` forces SimpleAuthManager on its own, which denies no single DAG."""
    name, _, _ = job
    af, _ = airflow
    port = free_port()
    env = {
        **af.env(),
        "AIRFLOW__CORE__AUTH_MANAGER": PER_DAG_AUTH,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)])),  # this module's tests/
        DENIED_USER: OUTSIDER,
        DENIED_DAGS: f".*__{re.escape(name)}",
    }
    log_file = af.home / "api-server-per-dag.log"
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [str(BIN / "airflow"), "api-server", "-H", "127.0.0.1", "-p", str(port), "-w", "1", "--apps", "core"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(base, proc, log_file), 180, f"the per-DAG API server did not answer (log {log_file})", af)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _healthy(base: str, proc: subprocess.Popen, log_file) -> bool:
    assert proc.poll() is None, f"the per-DAG API server exited ({proc.returncode}): {log_file.read_text()[-3000:]}"
    try:
        return requests.get(f"{base}/api/v2/monitor/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    OUTPUT.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def session(browser, af: AirflowStandalone, user: str, offline: bool = False):
    """A browser context logged in as `user` (the UI's session cookie); `offline`: every non-loopback request is blocked."""
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    context.add_cookies([{"name": "_token", "value": token(af, user), "url": af.base}])
    context.set_default_timeout(120_000)  # Playwright's 30 s is not enough for a first page on a loaded 2-core machine
    blocked: list[str] = []
    if offline:

        def route(r):
            if urlparse(r.request.url).hostname in ("127.0.0.1", "localhost"):
                r.continue_()
            else:
                blocked.append(r.request.url)
                r.abort()

        context.route("**/*", route)
    return context, blocked


def test_anonymous_calls_get_401_and_the_json_has_the_job(job, airflow):
    name, _, generation = job
    af, api = airflow
    for path in (
        f"api/jobs/{name}",
        f"jobs/{name}",
        f"api/jobs/{name}/plan?factor=8",
        f"api/jobs/{name}/metrics",
        f"api/jobs/{name}/quality",
        f"reports/{name}/summary.html",
    ):
        assert requests.get(f"{af.base}/elasticity/{path}", timeout=30).status_code == 401, path
    data = requests.get(
        f"{af.base}/elasticity/api/jobs/{name}", headers={"Authorization": f"Bearer {api.token}"}, timeout=30
    ).json()
    assert (data["generation"], data["factor"]) == (generation.number, 4)
    assert len(data["tasks"]) == 8 and sum(len(t) for t in data["containers"].values()) == 8
    assert [(r["factor"], r["origin"]) for r in data["rescales"]] == [(2, "start"), (4, "manual")]
    assert data["quality"]["success"] is True and data["quality_runs"][0]["run"] == "manual__ui_test"
    policy = data["policy"]
    assert policy["kind"] == "schedule" and [r["factor"] for r in policy["rules"]] == [3, 2] and policy["hold_factor"] == 4

    def get(path: str) -> dict:
        r = requests.get(f"{af.base}/elasticity/{path}", headers={"Authorization": f"Bearer {api.token}"}, timeout=30)
        r.raise_for_status()
        return r.json()

    ids = [b["batch_id"] for b in data["batches"]]
    latest = get(f"api/jobs/{name}/metrics?limit=1")
    assert [b["batch_id"] for b in latest["batches"]] == ids[-1:] and latest["older"] == ids[-1]
    older = get(f"api/jobs/{name}/metrics?limit=1000&before={latest['older']}")
    assert [b["batch_id"] for b in older["batches"]] == ids[:-1] and older["older"] is None
    assert [b["batch_id"] for b in get(f"api/jobs/{name}?limit=1")["batches"]] == ids[-1:]
    assert [r["run"] for r in get(f"api/jobs/{name}/quality")["runs"]] == ["manual__ui_test"]
    assert (
        requests.get(
            f"{af.base}/elasticity/api/jobs/{name}/metrics?limit=0", headers={"Authorization": f"Bearer {api.token}"}, timeout=30
        ).status_code
        == 422
    )


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_prometheus_metrics_are_behind_the_page_s_auth_and_agree_with_it(job, airflow, per_dag):
    name, _, generation = job
    af, api = airflow
    url = f"{af.base}/elasticity/metrics"
    assert requests.get(url, timeout=30).status_code == 401
    headers = {"Authorization": f"Bearer {api.token}"}
    view = requests.get(f"{af.base}/elasticity/api/jobs/{name}", headers=headers, timeout=30).json()
    took = []
    for _ in range(5):
        t0 = time.perf_counter()
        r = requests.get(url, headers=headers, timeout=60)
        took.append(time.perf_counter() - t0)
        r.raise_for_status()
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = _samples(r.text)
    label = (("job", name),)
    assert got[("elasticity_up", label)] == 1
    assert got[("elasticity_lag_records", label)] == view["records_behind"]
    assert got[("elasticity_elasticity_factor", label)] == 4 and got[("elasticity_virtual_tasks", label)] == 8
    assert got[("elasticity_generation", label)] == generation.number
    assert got[("elasticity_data_quality_success", label)] == 1
    assert got[("elasticity_last_batch_id", label)] == view["batches"][-1]["batch_id"]
    openmetrics = requests.get(url, headers={**headers, "Accept": "application/openmetrics-text; version=1.0.0"}, timeout=60)
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text") and openmetrics.text.endswith("# EOF\n")
    assert requests.get(url, params={"job": "nope"}, headers=headers, timeout=30).status_code == 404
    outsider = {"Authorization": f"Bearer {token(af, OUTSIDER, per_dag)}"}
    refused = requests.get(f"{per_dag}/elasticity/metrics", headers=outsider, timeout=60)
    assert refused.status_code == 200 and name not in refused.text  # the jobs it may read: not this one
    assert requests.get(f"{per_dag}/elasticity/metrics", params={"job": name}, headers=outsider, timeout=60).status_code == 403
    took.sort()
    print(
        f"\nmeasured: GET /elasticity/metrics (one job) {took[2] * 1000:.0f} ms median of 5, {took[0] * 1000:.0f}-{took[-1] * 1000:.0f} ms"
    )


def test_page_shows_charts_tasks_policy_and_quality_in_chromium(job, airflow, browser):
    name, _, generation = job
    af, _ = airflow
    context, _ = session(browser, af, "admin")
    page = context.new_page()
    page.goto(f"{af.base}/elasticity/jobs/{name}")
    assert page.locator("#factor").inner_text() == "4"
    assert page.locator("#factor-input").input_value() == "4"  # the rescale form starts at the current factor
    lag = page.locator("figure.chart").first
    assert lag.locator("g.x-axis").count() == 1 and lag.locator("g.y-axis").count() == 1
    assert lag.locator(".axis-label").first.text_content() == "offsets"
    legend = lag.locator(".legend-item").all_inner_texts()
    assert len(legend) == 7 and legend[-2:] == ["others", "factor change"]  # top 5 SSPKb, the other 3, the rescale
    assert lag.locator("circle title").count() > 0 and page.locator("g.mark").count() >= 1
    assert sorted(page.locator("td.task").all_inner_texts()) == sorted(t.task_name.name for t in generation.job_model.tasks())
    assert page.locator("td.lag").count() == 8
    stores = page.locator("td.stores").all_inner_texts()  # each task's store: its size and last marker (moved by the rescale)
    assert len(stores) == 8 and all(s.startswith("totals ") and "blobstore: " in s for s in stores), stores
    assert "ago)" in page.locator("#rescales time").first.inner_text()  # local time and how long ago
    assert "manual hold" in page.locator("#policy").inner_text() and "0 20 * * *" in page.locator("#policy").inner_text()
    assert page.locator("#quality .badge.success").first.inner_text() == "PASSED"
    fresh = page.locator("#freshness").inner_text()  # the batches just committed: p50 / p99 of the last hour
    assert " / " in fresh and "newest record" in fresh and fresh != "-", fresh
    cells = page.locator("#batches td.freshness").all_inner_texts()
    assert cells and all(" / " in c for c in cells), cells
    page.screenshot(path=str(OUTPUT / "elastic-job-page.png"), full_page=True)
    keep_docs_picture_true(page)
    context.close()


DOCS_PICTURE = REPO / "docs" / "elastic-job-page.png"


def keep_docs_picture_true(page) -> None:
    """The docs show this page as this test draws it: when its sections or tiles differ from those the docs'
    picture was taken with, the picture is retaken into docs/ and the test fails until it is committed."""
    outline = {
        "sections": page.locator("section > h2").all_inner_texts(),
        "tiles": page.locator(".cards .card > .k").all_inner_texts(),
    }
    recorded = DOCS_PICTURE.with_suffix(".json")
    if recorded.exists() and json.loads(recorded.read_text()) == outline:
        return
    page.screenshot(path=str(DOCS_PICTURE), full_page=True)
    recorded.write_text(json.dumps(outline, indent=2) + "\n")
    pytest.fail(f"the job page's sections or tiles changed since the docs' picture was taken: {DOCS_PICTURE} retaken; commit it")


def test_data_docs_open_styled_with_no_network(job, airflow, browser):
    name, _, _ = job
    af, _ = airflow
    context, blocked = session(browser, af, "admin", offline=True)
    page = context.new_page()
    refusals: list[str] = []  # what the report's Content-Security-Policy refused to load or run
    page.on("console", lambda m: refusals.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(f"{af.base}/elasticity/jobs/{name}")
    page.locator("#quality a.docs").first.click()
    page.wait_for_load_state("load")
    served = requests.get(page.url, headers={"Authorization": f"Bearer {token(af, 'admin')}"}, timeout=30)
    assert served.headers["Content-Security-Policy"].startswith("sandbox allow-scripts; default-src 'self';")
    assert "allow-same-origin" not in served.headers["Content-Security-Policy"]
    assert served.headers["X-Content-Type-Options"] == "nosniff"
    # sandboxed: an opaque origin, whose scripts can neither read the session cookie nor call Airflow as the user
    assert page.evaluate("self.origin") == "null"
    assert page.evaluate("(() => { try { return document.cookie } catch (e) { return e.name } })()") == "SecurityError"
    called = page.evaluate("fetch('/api/v2/dags', {credentials: 'include'}).then(r => r.status, e => e.name)")
    assert called == "TypeError", called
    rows = page.locator("#Validation-Results tr.clickable-row")
    assert rows.count() == 7  # the validation list (seven checks: a stateful job), filled without bootstrap-table
    assert page.evaluate("getComputedStyle(document.querySelector('.alert-secondary')).backgroundColor") == "rgb(233, 236, 239)"
    assert "manual__ui_test batches" in rows.first.inner_text()  # named after the run and its window
    page.screenshot(path=str(OUTPUT / "data-docs-offline.png"), full_page=True)
    rows.first.locator("a").first.click()
    page.wait_for_load_state("load")
    text = page.inner_text("body")
    assert "Data asset: None" not in text and "__none__" not in text and "Data asset: " in text
    assert page.evaluate("getComputedStyle(document.querySelector('.card')).borderTopStyle") == "solid"
    page.screenshot(path=str(OUTPUT / "data-docs-validation-offline.png"), full_page=True)
    context.close()
    assert blocked == []  # nothing even tried to leave the machine
    assert [r for r in refusals if "/api/v2/dags" not in r] == [], refusals  # only the test's own fetch was refused


def test_a_viewer_can_preview_but_not_rescale(job, airflow, browser):
    name, _, _ = job
    af, api = airflow
    before = len(api.runs("elastic_rescale"))
    context, _ = session(browser, af, "viewer")
    page = context.new_page()
    page.goto(f"{af.base}/elasticity/jobs/{name}")
    assert "preview only" in page.inner_text("#rescale-form")
    page.fill("#factor-input", "8")
    page.click("#preview")
    page.wait_for_selector("#plan-table")
    assert page.locator("#apply").is_disabled()
    # even past the disabled button, Airflow's API refuses this user's trigger
    status = page.evaluate(
        """f => fetch(f.dataset.triggerUrl, {method: 'POST', credentials: 'same-origin',
        headers: {'Content-Type': 'application/json'}, body: JSON.stringify({logical_date: null, conf: {job: f.dataset.job, factor: 8}})})
        .then(r => r.status)""",
        page.locator("#rescale-form").element_handle(),
    )
    assert status == 403
    context.close()
    assert len(api.runs("elastic_rescale")) == before


def test_a_user_refused_the_jobs_dags_gets_403_and_no_listing(job, airflow, per_dag):
    """The page asks Airflow's auth manager, per DAG: a user it refuses the job's DAGs gets 403 on everything of
    the job and does not see it listed, while a viewer it lets read them does."""
    name, _, _ = job
    af, _ = airflow
    outsider = {"Authorization": f"Bearer {token(af, OUTSIDER, per_dag)}"}
    viewer = {"Authorization": f"Bearer {token(af, 'viewer', per_dag)}"}
    dag = f"elastic_microbatch__{name}"
    assert requests.get(f"{per_dag}/api/v2/dags/{dag}", headers=outsider, timeout=30).status_code == 403  # Airflow's own
    folder = requests.get(f"{per_dag}/elasticity/api/jobs/{name}", headers=viewer, timeout=60).json()["quality_runs"][0]["folder"]
    assert requests.get(f"{per_dag}/api/v2/dags/elastic_rescale", headers=outsider, timeout=30).status_code == 200
    for path in (
        f"jobs/{name}",
        f"api/jobs/{name}",
        f"api/jobs/{name}/metrics",
        f"api/jobs/{name}/quality",
        f"api/jobs/{name}/plan?factor=2",
        f"reports/{name}/summary.html",
        f"reports/{name}/runs/{folder}/data_docs/index.html",
    ):
        r = requests.get(f"{per_dag}/elasticity/{path}", headers=outsider, timeout=30)
        assert r.status_code == 403, (path, r.status_code, r.text[:300])
        assert dag in r.json()["detail"] and OUTSIDER in r.json()["detail"], r.text
        assert requests.get(f"{per_dag}/elasticity/{path}", headers=viewer, timeout=60).status_code == 200, path
    listed = requests.get(f"{per_dag}/elasticity/api/jobs", headers=outsider, timeout=30)
    assert listed.status_code == 200 and name not in listed.json()
    assert name in requests.get(f"{per_dag}/elasticity/api/jobs", headers=viewer, timeout=30).json()


def test_the_state_dry_run_needs_what_a_rescale_needs(job, airflow):
    """The plan reads the checkpoints only; the state's dry run, which downloads and scans every store snapshot
    in the API server, answers only a user Airflow lets trigger elastic_rescale."""
    name, _, _ = job
    af, _ = airflow
    plan = f"{af.base}/elasticity/api/jobs/{name}/plan?factor=2"  # never the current factor (4, then 8)
    viewer = {"Authorization": f"Bearer {token(af, 'viewer')}"}
    cheap = requests.get(plan, headers=viewer, timeout=60)
    assert cheap.status_code == 200 and cheap.json()["moves"] and cheap.json()["state"] is None, cheap.text[:300]
    refused = requests.get(f"{plan}&state=true", headers=viewer, timeout=60)
    assert refused.status_code == 403 and "elastic_rescale" in refused.json()["detail"], refused.text
    admin = {"Authorization": f"Bearer {token(af, 'admin')}"}
    full = requests.get(f"{plan}&state=true", headers=admin, timeout=120)
    assert full.status_code == 200, full.text[:300]
    state = full.json()["state"]
    moved = [t for t in state["transfers"] if t["how"] == "moved"]
    assert moved and all(t["store"] == "totals" for t in state["transfers"])
    assert state["keys"] == sum(t["keys"] for t in moved) > 0 and state["bytes"] == sum(t["bytes"] for t in moved) > 0
    assert full.json()["moves"] == cheap.json()["moves"]


def test_preview_then_apply_starts_an_elastic_rescale_run(job, airflow, browser):
    name, _, _ = job
    af, api = airflow
    context, _ = session(browser, af, "admin")
    page = context.new_page()
    page.goto(f"{af.base}/elasticity/jobs/{name}")
    assert page.locator("#apply").is_disabled()  # preview first
    page.fill("#factor-input", "8")
    page.click("#preview")
    page.wait_for_selector("#plan-table")
    assert page.locator("#plan-table tr").count() == 1 + 16  # 2 partitions x 8 new virtual tasks
    assert "factor 4 \u2192 8, 8 \u2192 16 virtual tasks" in page.inner_text("#plan")
    page.screenshot(path=str(OUTPUT / "elastic-job-rescale-preview.png"), full_page=False)
    page.click("#apply")
    link = page.wait_for_selector("#run-link")
    run_id = link.inner_text()
    assert link.get_attribute("href").endswith(f"/dags/elastic_rescale/runs/{run_id}".replace("+", "%2B").replace(":", "%3A"))
    run = api.run("elastic_rescale", run_id)
    assert run["conf"] == {"job": name, "factor": 8, "dry_run": False}
    context.close()
    assert api.wait_run("elastic_rescale", run_id, 240)["state"] == "success", af.tail(60)  # the next test reads factor 8


def test_the_page_says_the_engine_is_down_the_run_retrying_and_the_records_actually_behind(job, airflow, browser):
    """Last (it feeds the topic): 60 new orders at factor 8 (the applied rescale) are 60 records behind and 480 offsets of SEP-32's
    lag (a partition's records counted once per bucket); spark_default's server is down: the page says so,
    naming it, and the micro-batch run it fails shows its attempt and its error line."""
    name, tmp, _ = job
    af, api = airflow
    topic = validate(parse_properties((tmp / "jobs" / f"{name}.properties").read_text())).inputs[0]
    dag = f"elastic_microbatch__{name}"
    api.wait_dag(dag)
    # the one scheduled run (@once), started when Airflow first saw the DAG, has ended: nothing to read, skipped
    (first,) = wait_for(lambda: finished(api, dag, lambda r: r["run_type"] == "scheduled"), 300, "no scheduled run", af)
    assert first["state"] == "success", first
    send(os.environ["KAFKA_BOOTSTRAP_SERVERS"], topic.stream, demo_records(60, keys=20, seed=33))
    headers = {"Authorization": f"Bearer {api.token}"}
    data = requests.get(f"{af.base}/elasticity/api/jobs/{name}", headers=headers, timeout=30).json()
    assert data["records_behind_per_partition"] and sum(data["records_behind_per_partition"].values()) == 60
    assert data["factor"] == 8 and sum(data["lag_per_task"].values()) == 8 * 60
    assert data["engine"]["address"] == f"sc://{DEAD_ENGINE}" and data["engine"]["reachable"] is False
    assert data["engine"]["since_ms"] > 0 and "elasticity cluster start" in data["engine"]["error"]
    api.unpause(dag)
    run_id = api.trigger(dag)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        run = requests.get(f"{af.base}/elasticity/api/jobs/{name}", headers=headers, timeout=30).json()["run"]
        if run and run["run_id"] == run_id and run["last_error"]:
            break
        time.sleep(3)
    assert run and run["run_id"] == run_id and run["attempt"] >= 1 and not run["stuck"], run
    assert run["last_error"].startswith(f"Spark Connect server sc://{DEAD_ENGINE} unreachable"), run
    context, _ = session(browser, af, "admin")
    page = context.new_page()
    page.goto(f"{af.base}/elasticity/jobs/{name}")
    assert page.locator("#records-behind").inner_text() == "60"
    assert f"sc://{DEAD_ENGINE}" in page.locator("#engine").inner_text() and "unreachable" in page.locator("#engine").inner_text()
    assert run_id in page.locator("#run").inner_text() and "unreachable" in page.locator("#run").inner_text()
    page.screenshot(path=str(OUTPUT / "elastic-job-engine-down.png"), full_page=False)
    context.close()
    api.unpause(dag, paused=True)
