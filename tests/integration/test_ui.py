"""The operators' page in a real Airflow: `airflow standalone` on loopback, a
login, the page in headless Chromium (Debian's, driven by Playwright), and the
JSON endpoint refusing anonymous calls."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from elasticity.config import validate
from elasticity.coordinator import JobCoordinator
from elasticity.demo import demo_records
from elasticity.kafka.broker import free_port
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.quality.runner import run_quality
from elasticity.spark.engine import MicroBatchEngine
from tests.conftest import REPO
from tests.helpers import fresh_topic, job_props, write_properties

CHROMIUM = "/usr/bin/chromium"
OUTPUT = REPO / "test-output"


@pytest.fixture(scope="module")
def job(spark, kafka_bootstrap, tmp_path_factory):
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = kafka_bootstrap
    tmp = tmp_path_factory.mktemp("ui")
    topic = fresh_topic(kafka_bootstrap, "ui", 2, records=500, seed=31)
    name = f"ui{uuid.uuid4().hex[:6]}"
    props = job_props(name, topic, tmp)
    (tmp / "jobs").mkdir()
    write_properties(tmp / "jobs" / f"{name}.properties", props)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=200)
    JobCoordinator(config, engine.store, engine.inputs).rescale(4)
    send(kafka_bootstrap, topic, demo_records(100, keys=20, seed=32))
    engine.run(until_caught_up=True)
    result, _ = run_quality(config, engine.store, KafkaInputs(config))
    assert result.success
    return name, tmp, engine.coordinator.current()


@pytest.fixture(scope="module")
def airflow(job, kafka_bootstrap, tmp_path_factory):
    name, tmp, _ = job
    home = tmp_path_factory.mktemp("airflow-standalone")
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__PARALLELISM": "2", "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "ELASTICITY_JOBS_DIR": str(tmp / "jobs"), "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    with open(home / "standalone.log", "w") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(["airflow", "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{base}/api/v2/monitor/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None, (home / "standalone.log").read_text()[-3000:]
            time.sleep(2)
        else:
            pytest.fail("airflow standalone did not answer within 180 s:\n" + (home / "standalone.log").read_text()[-3000:])
        password = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
        token = requests.post(f"{base}/auth/token", json={"username": "admin", "password": password}, timeout=30).json()["access_token"]
        yield base, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_json_endpoint_needs_airflow_auth(job, airflow):
    name, _, generation = job
    base, token = airflow
    assert requests.get(f"{base}/elasticity/api/jobs/{name}", timeout=30).status_code == 401
    data = requests.get(f"{base}/elasticity/api/jobs/{name}", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    assert (data["generation"], data["factor"]) == (generation.number, 4)
    assert sum(len(t) for t in data["containers"].values()) == 8
    assert [r["factor"] for r in data["rescales"]] == [2, 4]
    assert data["rescales"][1]["reason"].startswith("rescale 2 -> 4 (by ")
    assert data["quality"]["success"] is True


def test_page_shows_virtual_tasks_and_lag_in_chromium(job, airflow):
    from playwright.sync_api import sync_playwright

    name, _, generation = job
    base, token = airflow
    OUTPUT.mkdir(exist_ok=True)
    shot = OUTPUT / "elastic-job-page.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        context = browser.new_context(viewport={"width": 1200, "height": 1300})
        context.add_cookies([{"name": "_token", "value": token, "url": base}])  # the UI's session cookie after login
        page = context.new_page()
        page.goto(f"{base}/elasticity/jobs/{name}")
        assert page.locator("#factor").inner_text() == "4"
        tasks = page.locator("td.task").all_inner_texts()
        assert sorted(tasks) == sorted(t.task_name.name for t in generation.job_model.tasks())
        assert page.locator("td.lag").count() == 8 and page.locator("svg polyline").count() > 0
        assert "PASSED" in page.content()
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
