"""Job page benchmark: a job of 1,000 virtual tasks (8 partitions x factor 125 on
4 containers, rescaled from factor 100 halfway through 50 recorded batches) in a
SQLite store; the time to gather the page's data from the store and render it,
as the plugin does per request (the live lag comes from an in-memory stand-in
for the brokers, so the figure is the page's own cost, not Kafka's).

usage: PYTHONPATH=include:. python bench/ui_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream
from elasticity.jobmodel.object_mapper import ssp_to_key
from elasticity.metrics.summary import BatchSummary
from elasticity.views.jobview import PolicyView, build_view, preview_rescale
from elasticity.views.page import render

STREAM = SystemStream("kafka", "orders")
PARTITIONS, HIGH = 8, 1_000_000


class Inputs:
    """Eight partitions whose end is at offset 1,000,000."""

    def partition_counts(self, streams):
        return {s: PARTITIONS for s in streams}

    def offsets(self, ssps, which):
        return {s: 0 if which == "oldest" else HIGH for s in ssps}


def record_batches(store: CheckpointStore, coordinator: JobCoordinator, first: int, count: int) -> None:
    generation = coordinator.current()
    tasks = [t.task_name.name for t in generation.job_model.tasks()]
    cps = coordinator.checkpoints(generation)
    for b in range(first, first + count):
        lag = {ssp_to_key(s): HIGH - o + 97 * (first + count - b) for cp in cps.values() for s, o in cp.offsets.items()}
        summary = BatchSummary(
            job="bench-ui",
            batch_id=b,
            generation=generation.number,
            factor=generation.factor,
            finished_ms=int(time.time() * 1000) - (60 - b) * 60_000,
            records_read=5000 + 40 * b,
            task_count=len(tasks),
            lag_left=sum(lag.values()),
            durations_ms={"plan": 20, "spark": 900, "process": 700, "total": 1000 + 5 * b},
            metrics={
                "lag": lag,
                "records": {t: 5 + i % 7 for i, t in enumerate(tasks)},
                "process-ns": {t: 2_000_000 + 1000 * i for i, t in enumerate(tasks)},
            },
        )
        store.record_metrics("bench-ui", b, generation.number, summary.to_json())


def drift(coordinator: JobCoordinator) -> None:
    """Offsets that differ per bucket, as slow virtual tasks leave them."""
    generation = coordinator.current()
    coordinator.replace_checkpoints(
        [
            TaskCheckpoint(
                task_name=t.task_name,
                offsets={s: HIGH - 1000 - 37 * s.partition - 11 * max(s.key_bucket, 0) for s in t.system_stream_partitions},
            )
            for t in generation.job_model.tasks()
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ui-bench-"))
    config = validate(
        {
            "job.name": "bench-ui",
            "task.inputs": str(STREAM),
            "job.elasticity.factor": "100",
            "job.container.count": "4",
            "task.checkpoint.store.url": f"sqlite:///{tmp / 'checkpoints.db'}",
            "job.report.path": str(tmp / "reports"),
        }
    )
    store = CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size)
    inputs = Inputs()
    coordinator = JobCoordinator(config, store, inputs)
    coordinator.initialize()
    drift(coordinator)
    record_batches(store, coordinator, 1, 25)
    coordinator.rescale(125, owner="bench")
    drift(coordinator)
    record_batches(store, coordinator, 26, 25)
    policy = PolicyView(
        kind="none",
        wants=None,
        reason="no job.elasticity.schedule and no autosizer",
        next_step="nothing: the factor changes only when someone rescales",
    )

    samples, size, tasks = [], 0, 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        view = build_view(config, store, inputs, policy)
        page = render(view, page=3)
        samples.append(time.perf_counter() - start)
        size, tasks = len(page), len(view.tasks)
    start = time.perf_counter()
    plan = preview_rescale(config, store, inputs, 250)
    plan_s = time.perf_counter() - start
    print(
        json.dumps(
            {
                "virtual_tasks": tasks,
                "batches": len(view.batches),
                "page_bytes": size,
                "page_seconds_median": round(statistics.median(samples), 3),
                "page_seconds_max": round(max(samples), 3),
                "preview_to_250_seconds": round(plan_s, 3),
                "preview_moves": len(plan.moves),
            },
            indent=1,
        )
    )
    print(f"job page with {tasks:,} virtual tasks: {statistics.median(samples):.2f} s (median of {args.repeat}; budget 2 s)")


if __name__ == "__main__":
    import results

    sys.exit(results.run("ui_bench", main))
