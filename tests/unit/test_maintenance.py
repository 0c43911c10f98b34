"""Retention without Airflow: the data-quality index (in the store) a page at a time, its runs expired whole,
and `maintain` over a SQLite store with a fake clock, step by step."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, read_table, write_batch_file
from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.store import CheckpointStore, QualityEdge
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from elasticity.maintenance import STEPS, MaintenanceFailed, maintain
from elasticity.quality import history
from elasticity.quality.report import write_index
from elasticity.quality.report_files import ReportFiles

DAY = 86_400_000
S = SystemStream("kafka", "orders")
SSP0 = SystemStreamPartition("kafka", "orders", 0)


def finish_run(
    store: CheckpointStore, root: Path, n: int, success: bool = True, folder: str | None = None, job: str = "j"
) -> str:
    """What a data-quality run leaves: its folder with summary.json, then its row in the store's index."""
    folder = folder or f"run{n:04d}"
    summary = {
        "job": job,
        "run": folder,
        "window": f"batches {n}..{n}",
        "batches": [n],
        "success": success,
        "finished_ms": 1_000 * n,
        "checks": [
            {
                "name": "no_loss",
                "success": success,
                "rows": 3,
                "unexpected": 0 if success else 1,
                "describe": "x",
                "examples": ["k"],
            }
        ],
    }
    (root / "runs" / folder / "data_docs").mkdir(parents=True, exist_ok=True)
    (root / "runs" / folder / "summary.json").write_text(json.dumps(summary))
    history.record_run(store, job, summary, ReportFiles(str(root)).child(f"runs/{folder}"))
    return folder


@pytest.fixture
def store(tmp_path):
    s = CheckpointStore(f"sqlite:///{tmp_path / 'index.db'}")
    yield s
    s.close()


def test_the_index_pages_from_its_end_and_keeps_no_examples(tmp_path, store):
    for n in range(1, 8):
        finish_run(store, tmp_path, n)
    page = history.run_page(store, "j", limit=3)
    assert [r["run"] for r in page.runs] == ["run0007", "run0006", "run0005"] and page.older == 5
    page = history.run_page(store, "j", limit=3, before=page.older)
    assert [r["run"] for r in page.runs] == ["run0004", "run0003", "run0002"]
    last = history.run_page(store, "j", limit=3, before=page.older)
    assert [r["run"] for r in last.runs] == ["run0001"] and last.older is None
    assert "examples" not in last.runs[0]["checks"][0] and "batches" not in last.runs[0]
    assert last.runs[0]["checks"][0] == {"name": "no_loss", "success": True, "rows": 3, "unexpected": 0, "describe": "x"}
    assert last.runs[0]["folder"] == "run0001" and last.runs[0]["report"] == str(tmp_path / "runs" / "run0001")


def test_the_index_is_the_stores_and_a_retried_run_is_listed_once(tmp_path, store):
    """Nothing of the index is on the report folder's disk: another process, with the store alone, reads it;
    a retried run (its folder written again) keeps one row, its latest."""
    reports = tmp_path / "reports"
    for n in range(1, 4):
        finish_run(store, reports, n)
    finish_run(store, reports, 4, success=False, folder="run0002")
    assert [p.name for p in reports.iterdir()] == ["runs"]
    other = CheckpointStore(store.url)
    runs = history.run_page(other, "j", limit=10).runs
    assert [(r["run"], r["success"]) for r in runs] == [("run0002", False), ("run0003", True), ("run0001", True)]
    assert history.run_page(other, "another job", limit=10).runs == ()
    other.close()


def test_expiry_keeps_the_latest_runs_and_failed_ones_capped_and_removes_the_rest_whole(tmp_path, store):
    failed = {3, 5, 9, 14}
    for n in range(1, 21):
        finish_run(store, tmp_path, n, success=n not in failed)
    finish_run(store, tmp_path, 20, folder="run0020")  # a retry of the last run: one run, its latest row
    orphan, young = tmp_path / "runs" / "died-long-ago", tmp_path / "runs" / "running-now"
    orphan.mkdir()
    young.mkdir()
    os.utime(orphan, (0, 0))

    reports = ReportFiles(str(tmp_path))
    assert history.expire_runs(store, "j", reports, keep=5, keep_failed=2) == 20 - 5 - 2 + 1  # and the old orphan
    kept = [r["run"] for r in history.run_page(store, "j", limit=100).runs]
    assert kept == ["run0020", "run0019", "run0018", "run0017", "run0016", "run0014", "run0009"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted([*kept, "running-now"])
    write_index(reports, store, "j", [])
    page = (tmp_path / "summary.html").read_text()
    assert "runs/run0009/summary.html" in page and "run0005" not in page and "run0001" not in page
    assert history.expire_runs(store, "j", reports, keep=5, keep_failed=2) == 0


def config_for(tmp_path: Path, **overrides: str):
    return validate(
        {
            "job.name": "kept",
            "task.inputs": str(S),
            "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
            "job.report.path": str(tmp_path / "reports"),
            "quality.report.retain.runs": "3",
            "quality.report.retain.failed.runs": "1",
            **overrides,
        }
    )


class Clock:
    now = 1_000 * DAY

    def __call__(self) -> int:
        return self.now


def test_maintain_runs_every_step_with_the_configured_retention_and_the_validated_edge(tmp_path):
    config = config_for(tmp_path, **{"job.audit.path": str(tmp_path / "audit")})
    clock = Clock()
    store = CheckpointStore(config.checkpoint_store_url(), clock=clock)
    model = build_job_model(config, {S: 1})
    cps = {
        t.task_name: TaskCheckpoint(task_name=t.task_name, offsets={s: 0 for s in t.system_stream_partitions})
        for t in model.tasks()
    }
    store.acquire_lease("kept", "me", 10_000)
    store.write_generation("kept", 0, 1, model=model, compute=lambda old: cps, owner="me", reason="first")
    store.release_lease("kept", "me")
    for b in range(1, 31):  # a batch a day for 30 days
        plan = store.plan_batch("kept", 1, (OffsetRange(SSP0, b, b + 1),))
        store.commit_batch(plan, cps.values())
        store.record_metrics("kept", plan.batch_id, 1, json.dumps({"batch_id": plan.batch_id}))
        store.open_transactional_id("kept", f"tid-{b}", "kafka")
        store.close_transactional_ids("kept", [f"tid-{b}"])
        row = {"system": "kafka", "stream": "in", "partition": 0, "offset": b, "key": b"k", "task_name": "Partition 0"}
        write_batch_file(str(tmp_path / "audit"), b, "slot-0", pa.Table.from_pylist([{**row, "seq": 0, "status": "processed"}]))
        clock.now += DAY
    reports = tmp_path / "reports"
    for n in range(1, 7):
        finish_run(store, reports, n, success=n != 2, job="kept")
    store.save_quality_edge("kept", QualityEdge(last_batch=20, edge="{}", positions=b""))  # as data quality left it
    clock.now -= 8 * DAY  # a failure and a probe older than the week metrics are kept for: expired like them
    store.record_failure("kept", run_id="r1", attempt=1, task="run_batches", error="boom")
    store.engine_probed("sc://gone:15002", reachable=False)
    clock.now += 8 * DAY
    store.engine_probed("sc://here:15002", reachable=True)
    store.record_failure("kept", run_id="r2", attempt=1, task="run_batches", error="recent")

    report = maintain(config, store, now_ms=clock.now)
    assert report.validated_batch == 20
    # a week of plans stays (batches 24..30 ended within it); up to the validated batch 20 only
    assert report.removed == {
        "sink_files": 19,  # the audit files of the validated batches 1..20, compacted into one
        "batch_plans": 20,
        "metrics": 23,
        "attempt_failures": 1,
        "engine_health": 1,
        "transactional_ids": 30,
        "checkpoints": 0,
        "generations": 0,
        "report_runs": 2,
    }
    assert [p.batch_id for p in store.plans("kept")][0] == 21 and store.plan("kept", 30) is not None
    assert [m["batch_id"] for m in store.metrics("kept")] == list(range(24, 31))
    assert [r["run"] for r in history.run_page(store, "kept", limit=10).runs] == ["run0006", "run0005", "run0004", "run0002"]
    assert sorted(p.name for p in (reports / "runs").iterdir()) == ["run0002", "run0004", "run0005", "run0006"]
    assert store.last_failure("kept", "r1") is None and store.last_failure("kept", "r2").error == "recent"
    assert store.plan_batch("kept", 1, ()).batch_id == 31
    assert read_table(str(tmp_path / "audit"), AUDIT_SCHEMA).column("batch_id").to_pylist() == list(range(1, 31))
    assert set(maintain(config, store, now_ms=clock.now).removed.values()) == {0}


@dataclass(frozen=True)
class Compacted:
    files: int
    bytes: int
    note: str = "not a count"


def test_a_step_returns_a_count_or_a_dataclass_of_counts_and_one_failing_does_not_stop_the_others(tmp_path):
    config = config_for(tmp_path)
    store = CheckpointStore(config.checkpoint_store_url())
    ran = []

    def broken(m):
        raise OSError("disk gone")

    steps = (
        ("sinks", lambda m: Compacted(3, 4096)),
        ("broken", broken),
        ("last", lambda m: ran.append(m.validated_batch) or 0),
    )
    assert maintain(config, store, now_ms=0, steps=steps[:1]).removed == {"sinks.files": 3, "sinks.bytes": 4096}
    with pytest.raises(MaintenanceFailed, match=r"sinks.files 3.*broken: disk gone"):
        maintain(config, store, now_ms=0, steps=steps)
    assert ran == [0]  # no data-quality run yet: nothing validated
    assert [name for name, _ in STEPS] == [
        "sink_files",
        "batch_plans",
        "metrics",
        "attempt_failures",
        "engine_health",
        "transactional_ids",
        "checkpoints",
        "generations",
        "report_runs",
    ]
