"""Checkpoint benchmark: rescale migration of 10,000 virtual tasks and the commit
of one batch of 1,000 virtual tasks, on SQLite and PostgreSQL, measured side by
side in one run (absolute times drift on a shared machine; the ratios hold).

usage: python bench/checkpoint_bench.py [--postgres URL] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.migration import migrate
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream

STREAM = SystemStream("kafka", "orders")


def model(partitions: int, factor: int):
    config = validate({"job.name": "bench", "task.inputs": str(STREAM), "job.elasticity.factor": str(factor)})
    return build_job_model(config, {STREAM: partitions})


def drifted_checkpoints(m) -> list[TaskCheckpoint]:
    """Offsets that differ per bucket, as slow virtual tasks leave them."""
    return [
        TaskCheckpoint(
            task_name=t.task_name,
            offsets={s: 1_000_000 + 37 * s.partition + 11 * max(s.key_bucket, 0) for s in t.system_stream_partitions},
        )
        for t in m.tasks()
    ]


def timed(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def bench_store(url: str, repeat: int) -> dict[str, float]:
    store = CheckpointStore(url)
    out = {}
    # rescale of 10,000 virtual tasks (1,250 partitions x 8) to 16, under the lease, in one transaction
    old_model, new_model = model(1250, 8), model(1250, 16)
    old_cps = drifted_checkpoints(old_model)

    def rescale_once():
        job = f"bench-{uuid.uuid4().hex[:8]}"
        store.acquire_lease(job, "bench", 60_000)
        store.write_generation(
            job, 0, 8, model=old_model, compute=lambda _: {c.task_name: c for c in old_cps}, owner="bench", reason="first"
        )
        start = time.perf_counter()
        store.write_generation(
            job,
            1,
            16,
            model=new_model,
            compute=lambda old: migrate(8, old.values(), new_model, new_factor=16, new_ssp_offsets={}).checkpoints,
            owner="bench",
            reason="split",
        )
        return (time.perf_counter() - start) * 1000

    out["rescale 10,000 vtasks 8->16 (store)"] = statistics.median(rescale_once() for _ in range(repeat))

    # commit of one batch of 1,000 virtual tasks (125 partitions x 8)
    m = model(125, 8)
    cps = drifted_checkpoints(m)
    job = f"bench-{uuid.uuid4().hex[:8]}"
    store.acquire_lease(job, "bench", 60_000)
    store.write_generation(job, 0, 8, model=m, compute=lambda _: {c.task_name: c for c in cps}, owner="bench", reason="first")
    store.release_lease(job, "bench")
    ranges = tuple(OffsetRange(s, 0, 1) for s in {s.without_key_bucket() for t in m.tasks() for s in t.system_stream_partitions})
    for versions in ((1, 2), (2,)):

        def commit(versions=versions):
            plan = store.plan_batch(job, 1, ranges)
            store.commit_batch(plan, cps, write_versions=versions)

        out[f"commit 1,000 vtasks, versions {','.join(map(str, versions))}"] = timed(commit, repeat)
    out["read 1,000 vtasks' checkpoints"] = timed(lambda: store.checkpoints(job, 1, (2, 1)), repeat)
    store.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument(
        "--postgres", default=os.environ.get("ELASTICITY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    )
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()

    (old_model,) = [model(1250, 8)]
    old_cps = drifted_checkpoints(old_model)
    pure = {}
    for g in (16, 4, 6, 1):
        new_model = model(1250, g)
        pure[f"migrate 10,000 vtasks 8->{g} (pure)"] = timed(
            lambda nm=new_model, g=g: migrate(8, old_cps, nm, new_factor=g, new_ssp_offsets={}), args.repeat
        )

    with tempfile.TemporaryDirectory() as tmp:
        results = {"sqlite": bench_store(f"sqlite:///{tmp}/bench.db", args.repeat)}
    try:
        results["postgres"] = bench_store(args.postgres, args.repeat)
    except Exception as e:  # noqa: BLE001 - the benchmark still reports SQLite
        print(f"postgres skipped: {type(e).__name__}: {e}")

    print(f"\nmedian of {args.repeat} runs, ms")
    for name, ms in pure.items():
        print(f"{name:45s} {ms:10.1f}")
    names = list(results["sqlite"])
    print(f"\n{'':45s} {'sqlite':>10s} {'postgres':>10s} {'pg/sqlite':>10s}")
    for name in names:
        s = results["sqlite"][name]
        pg = results.get("postgres", {}).get(name)
        print(f"{name:45s} {s:10.1f} {pg if pg is not None else float('nan'):10.1f} {(pg / s) if pg else float('nan'):10.2f}")
    dual, single = names[1], names[2]
    for db, r in results.items():
        print(f"{db}: dual write (1,2) costs {r[dual] / r[single]:.2f}x a V2-only commit")


if __name__ == "__main__":
    import results

    sys.exit(results.run("checkpoint_bench", main))
