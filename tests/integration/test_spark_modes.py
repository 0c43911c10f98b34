"""The same batch through spark-submit and through Spark Connect (a local Connect server)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.helpers import fresh_topic, job_props, write_properties

BIN = Path(sys.executable).parent


@pytest.fixture
def job_file(kafka_bootstrap, tmp_path):
    topic = fresh_topic(kafka_bootstrap, "modes", 2, records=300, keys=10)

    def write(**extra):
        return write_properties(tmp_path / "job.properties", job_props(f"modes-{topic}", topic, tmp_path, factor=4, **extra))

    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{BIN}:{os.environ['PATH']}",
    }
    return write, env


def _summary(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_spark_submit_runs_the_batch(job_file):
    write, env = job_file
    path = write(**{"spark.master": "local[1]"})  # spark-submit's --master must win over the config
    out = subprocess.run(
        [
            str(BIN / "spark-submit"),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            str(REPO / "spark_apps" / "run_batch.py"),
            "--config",
            str(path),
            "--until-caught-up",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = _summary(out)
    assert summary["processed"] == 300 and summary["lag_left"] == 0 and summary["task_count"] == 8


def test_spark_connect_runs_batches_on_the_warm_server(job_file, spark_connect, kafka_bootstrap):
    """The default path: the CLI as a thin Connect client of a long-lived server; a second run reuses its
    session (one per job), and a run with nothing to read never starts Spark."""
    write, env = job_file
    path = write(**{"spark.remote": spark_connect})
    args = [str(BIN / "elasticity"), "run-batch", "--config", str(path), "--until-caught-up"]
    first = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    summary = _summary(first)
    assert summary["processed"] == 300 and summary["factor"] == 4 and summary["lag_left"] == 0
    empty = subprocess.run(
        [*args, "--max-seconds", "30"],
        cwd=REPO,
        env={**env, "SPARK_REMOTE": "sc://127.0.0.1:1"},
        capture_output=True,
        text=True,
        timeout=120,
    )  # a dead Spark address: never touched
    assert _summary(empty)["batch_id"] is None
    send_more(kafka_bootstrap, path)
    second = _summary(subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300))
    assert second["processed"] == 50 and second["batch_id"] == summary["batch_id"] + 1


def test_the_embedded_server_is_the_default(job_file, spark_connect_server, monkeypatch):
    from elasticity.config import load_config
    from elasticity.spark.target import resolve_target

    write, _ = job_file
    config = load_config(write())
    monkeypatch.setenv("ELASTICITY_HOME", str(spark_connect_server.home))
    target = resolve_target(config)
    assert (target.kind, target.value) == ("connect", spark_connect_server.remote) and "embedded" in target.source
    assert resolve_target(load_config(write(**{"spark.master": "local[1]"}))).value == "local[1]"  # an explicit master wins


def send_more(bootstrap: str, config_path: Path) -> None:
    from elasticity.apps.demo_feed import demo_records
    from elasticity.config import load_config
    from elasticity.kafka.producer import send

    send(bootstrap, load_config(config_path).inputs[0].stream, demo_records(50, keys=10, seed=3))


def test_a_process_with_a_connect_client_forks_safely(spark_connect):
    """The test process holds Connect clients while pyspark forks a classic driver's JVM (a fork with a
    `preexec_fn`, so fork handlers run): with gRPC's fork support on, about 2 such children in 100 were aborted
    by gRPC before their exec (the driver "exited before sending its port number"), and some forks hung."""
    import signal
    import threading

    from pyspark.sql.connect.session import SparkSession as ConnectSession

    codes: list[int] = []

    def forks_300() -> None:
        for _ in range(300):
            child = subprocess.Popen(["true"], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            codes.append(child.wait())

    client = ConnectSession.builder.remote(spark_connect).create()
    try:
        assert client.range(3).count() == 3  # the channel and its poller are live
        forks = threading.Thread(target=forks_300, daemon=True)
        forks.start()
        forks.join(timeout=60)
    finally:
        client.stop()
    assert not forks.is_alive(), f"a fork hung after {len(codes)} of 300"
    assert codes == [0] * 300, f"{sum(c != 0 for c in codes)} of 300 children died before their exec: {set(codes)}"
