"""The same batch through spark-submit and through Spark Connect (a local Connect server)."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from elasticity.demo import demo_records
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send
from tests.conftest import REPO

BIN = Path(sys.executable).parent


@pytest.fixture
def job_file(kafka_bootstrap, tmp_path):
    topic = f"modes-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    send(kafka_bootstrap, topic, demo_records(300, 10))

    def write(**extra):
        props = {
            "job.name": f"modes-{topic}", "task.inputs": f"kafka.{topic}", "job.elasticity.factor": "4",
            "systems.kafka.default.stream.offset.default": "oldest",
            "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}", "job.output.path": str(tmp_path / "out"),
            "job.audit.path": str(tmp_path / "audit"), "job.dead.letter.path": str(tmp_path / "dlq"), **extra,
        }
        path = tmp_path / "job.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "PYSPARK_PYTHON": sys.executable, "PATH": f"{BIN}:{os.environ['PATH']}"}
    return write, env


def _summary(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_spark_submit_runs_the_batch(job_file):
    write, env = job_file
    path = write(**{"spark.master": "local[1]"})  # spark-submit's --master must win over the config
    out = subprocess.run(
        [str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false", str(REPO / "spark_apps" / "run_batch.py"),
         "--config", str(path), "--until-caught-up"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    summary = _summary(out)
    assert summary["processed"] == 300 and summary["lag_left"] == 0 and summary["task_count"] == 8


def test_spark_connect_runs_the_batch(job_file):
    write, env = job_file
    path = write(**{"spark.remote": "local[2]"})
    out = subprocess.run([str(BIN / "elasticity"), "run-batch", "--config", str(path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    summary = _summary(out)
    assert summary["processed"] == 300 and summary["factor"] == 4
