"""An app that only the driver has on its path runs on the Spark Connect server's executors: its module is
shipped as a content-addressed artifact, a changed app file is the next batch's code, and a pure-Python
package given in spark.submit.pyFiles (a wheel built here) is importable in it."""

from __future__ import annotations

import json
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA, read_table
from elasticity.config import validate
from elasticity.kafka.producer import send
from elasticity.spark.engine import MicroBatchEngine
from elasticity.spark.session import session
from tests.support.helpers import fresh_topic, job_props

APP = """
import shiptag

VERSION = {version}


def build(app):
    for s in app.job_inputs:
        app.input(s).map(lambda m: {{"version": VERSION, "tag": shiptag.tag(m.offset)}}).send_to("parquet.out")
"""


def write_app(folder: Path, version: int, module: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{module}.py").write_text(APP.format(version=version))


def write_wheel(path: Path) -> Path:
    """A pure-Python wheel of package `shiptag`, as `pip wheel` lays one out."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("shiptag/__init__.py", "def tag(offset):\n    return f'tag-{offset}'\n")
        z.writestr("shiptag-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: shiptag\nVersion: 1.0\n")
        z.writestr("shiptag-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("shiptag-1.0.dist-info/RECORD", "")
    return path


def shipped_job(tmp_path: Path, bootstrap: str, topic: str, module: str, **extra: str) -> dict[str, str]:
    """A job whose app `module` lives in tmp_path/code, on the driver's sys.path only."""
    wheel = write_wheel(tmp_path / "shiptag-1.0-py3-none-any.whl")
    settings = {
        "app.class": f"{module}:build",
        "spark.submit.pyFiles": str(wheel),
        "systems.kafka.consumer.bootstrap.servers": bootstrap,
    }
    return job_props(f"ship-{topic}", topic, tmp_path, **settings, **extra)


def outputs(config) -> dict[int, set[tuple[int, str]]]:
    """batch_id -> {(version, tag)} of parquet.out; every tag names its record's offset."""
    rows = read_table(f"{config.get('job.output.path')}/out", OUTPUT_SCHEMA).to_pylist()
    by_batch: dict[int, set[tuple[int, str]]] = {}
    for r in rows:
        value = json.loads(r["value"])
        assert value["tag"] == f"tag-{r['source_offset']}"
        by_batch.setdefault(r["batch_id"], set()).add((value["version"], value["tag"][:4]))
    return by_batch


def test_an_app_on_the_drivers_path_only_runs_on_the_connect_server_and_a_changed_app_is_the_next_batchs(
    spark_connect, kafka_bootstrap, tmp_path, monkeypatch, forget_app_modules
):
    module = f"orders_app_{uuid.uuid4().hex[:8]}"
    code = tmp_path / "code"
    write_app(code, 1, module)
    monkeypatch.syspath_prepend(str(code))  # the driver's path; the Connect server started without it
    topic = fresh_topic(kafka_bootstrap, "ship", 2, records=60)
    config = validate(shipped_job(tmp_path, kafka_bootstrap, topic, module, **{"spark.remote": spark_connect}))
    spark = session(config)
    first = MicroBatchEngine(config, spark).run()
    assert first[-1].processed == 60 and first[-1].dead_lettered == 0
    assert outputs(config) == {first[-1].batch_id: {(1, "tag-")}}

    write_app(code, 2, module)  # the user edits the app between runs
    send(kafka_bootstrap, topic, [(b"k", b"{}")] * 10)
    second = MicroBatchEngine(config, spark).run()
    assert second[-1].processed == 10
    assert outputs(config)[second[-1].batch_id] == {(2, "tag-")}  # the new code, on workers that ran the old


@pytest.fixture
def forget_app_modules():
    """The driver imported the tmp app: forgotten after the test."""
    before = set(sys.modules)
    yield
    for m in set(sys.modules) - before:
        if m.startswith(("orders_app_", "shiptag")):
            del sys.modules[m]
