"""The same batch through spark-submit and through Spark Connect (a local Connect server)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import fresh_topic, job_props, write_properties

BIN = Path(sys.executable).parent


@pytest.fixture
def job_file(kafka_bootstrap, tmp_path):
    topic = fresh_topic(kafka_bootstrap, "modes", 2, records=300, keys=10)

    def write(**extra):
        return write_properties(tmp_path / "job.properties", job_props(f"modes-{topic}", topic, tmp_path, factor=4, **extra))

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
