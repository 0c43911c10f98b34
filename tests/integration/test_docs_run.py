"""docs/first-job.md runs as written: its blocks, top to bottom, as one bash script in a fresh home folder
(the config and the app written where the page says, the broker and the Spark Connect server started by
its commands, a batch, the output read with pandas, a rescale, a second batch, the services stopped), and
what it says it prints is what it prints. The page's Airflow jobs folder gives the job its DAGs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elasticity.local.daemon import free_port
from tests.conftest import REPO
from tests.support.doc_blocks import blocks, script, shown_output

PAGE = REPO / "docs" / "first-job.md"
FOLDER = "orders-job"  # where the page's first commands take the shell: ~/orders-job


def _env(home: Path, output: Path) -> dict[str, str]:
    """A fresh shell's: the venv's bin on PATH (the page's install step), no variable of the test session."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ELASTICITY_", "AIRFLOW", "PYSPARK", "KAFKA_", "SPARK_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    return {**env, "HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{env['PATH']}", "DOC_OUTPUT": str(output)}


def _on_free_ports(text: str) -> str:
    """The services on free ports: the page's defaults (9092, 15002) may be taken on a shared machine."""
    broker, spark = free_port(), free_port()
    text = text.replace("elasticity broker start ", f"elasticity broker start --port {broker} ", 1)
    return text.replace("elasticity spark start ", f"elasticity spark start --port {spark} ", 1)


def _shape(line: str) -> str:
    """A line with its numbers as N: where the null-keyed records land (the producer's random partition for
    a null key) moves the offsets by a few from run to run; the page shows one run."""
    return re.sub(r"\d+", "N", line.strip())


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory):
    home = tmp_path_factory.mktemp("first-job-home")
    output = home / ".doc-output"
    output.mkdir()
    page_blocks = blocks(PAGE, REPO)
    text = _on_free_ports(script(page_blocks))
    env = _env(home, output)
    started = time.monotonic()
    try:
        done = subprocess.run(["bash", "-c", text], cwd=home, env=env, capture_output=True, text=True, timeout=240)
    finally:  # the page's last step stops them; this is for a page that failed before it
        for service in ("spark", "broker"):
            subprocess.run(["elasticity", service, "stop"], cwd=home / FOLDER, env={**env, "ELASTICITY_HOME": str(home / FOLDER / ".elasticity")}, capture_output=True, timeout=60)  # fmt: skip
    print(f"first-job walkthrough: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, (
        f"the page's script failed:\n{text}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    )
    return page_blocks, done.stdout, output, home / FOLDER


def test_the_first_job_page_runs_and_prints_what_it_shows(walkthrough):
    page_blocks, stdout, output, folder = walkthrough
    sessions = [b for b in page_blocks if b.not_run is None and shown_output(b.text)]
    assert sessions
    for b in sessions:
        got = [_shape(line) for line in (output / str(b.line)).read_text().splitlines()]
        shown = iter(got)
        for line in shown_output(b.text):  # each shown line, in order, among what the command printed
            assert any(_shape(line) == g for g in shown), f"{b.where}: {line.strip()!r} not printed:\n{got}"
    # the prose of step 5: the first batch read 2,000 records, processed them all, wrote 1,606 outputs, 8 tasks
    batches = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"job":"orders"')]
    first = batches[0]
    assert (first["records_read"], first["processed"], first["outputs"], first["task_count"]) == (2000, 2000, 1606, 8)
    assert (
        sorted(first["offsets_committed"])[0] == "Partition_0-0-4" and sorted(first["offsets_committed"])[-1] == "Partition_1-3-4"
    )
    # step 7: after the rescale to factor 2, the second batch ran on 4 virtual tasks over the 500 new orders
    assert (batches[-1]["factor"], batches[-1]["task_count"], batches[-1]["records_read"]) == (2, 4, 500)
    assert "applied: generation 2 at factor 2" in stdout and "dry run: nothing written" in stdout
    # step 6: the reading block printed its count, the big orders of the first batch
    assert "1606 big orders from 8 virtual tasks" in stdout
    # step 8: the services stopped, the clean-up left the job's own files
    assert (folder / "orders.properties").is_file() and not (folder / ".elasticity").exists()


def test_the_airflow_jobs_folder_of_the_page_gives_the_job_its_dags(walkthrough, tmp_path, monkeypatch):
    """The page's last block, short of starting Airflow: a jobs folder of the user's own, and the project's DAG
    files build the job's DAGs from it."""
    _, _, _, folder = walkthrough
    (airflow,) = [b for b in blocks(PAGE, REPO) if b.not_run and "ELASTICITY_JOBS_DIR=" in b.text]
    assert "ELASTICITY_JOBS_DIR=$PWD/jobs" in airflow.text and "ELASTICITY_PROJECT_DIR=" in airflow.text
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "orders.properties").write_text((folder / "orders.properties").read_text())
    monkeypatch.setenv("ELASTICITY_JOBS_DIR", str(jobs))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    assert {"elastic_microbatch__orders", "elastic_data_quality__orders"} <= set(bag.dag_ids)
