"""Virtual-task and factor sweeps: the engine's own cost per virtual task and per batch, and how much of what
the data allows each factor reaches. Every figure is measured side by side in one run and printed as a ratio.

  1. virtual-task sweep: the same 24,000 records of a 0 ms app (identity) in batches of 3,000, at 8 (4
     partitions x factor 2), 256 (32 x 8) and 4,096 (128 x 32) virtual tasks: per batch (the median of its
     batches) the plan, the Spark job, the process stage, the new checkpoints, the commit and the files
     written; then a run with nothing to read, and a rescale to twice the factor.
  2. factor sweep: 12,000 records over 3,000 users on 4 partitions, the 20 ms enrichment app (sync lookups),
     batches of 3,000, only the factor set (the default pool): factors 2 to 64, with and without a 10 % hot
     key, each beside its slowest-task limit (per batch, its busiest virtual task's lookups one after another:
     per-key order bounds a batch by it); the highest factor again with each pool size of --pools.

usage: python bench/vtask_bench.py [--records 12000] [--vtask-records 24000] [--warm 300000] [--vtasks 8,256,4096] [--factors 2,4,8,16,32,64] [--pools 64]
       [--skip-vtasks] [--skip-factors] [--profile DIR]
--profile: py-spy (`.venv/bin/pip install py-spy`) on the driver (every thread, idle ones too: where a batch waits)
and the Python workers (holding the GIL) during each measured run of the virtual-task sweep, as raw collapsed stacks.
Starts an embedded broker and a Spark Connect server on local[2] of its own. A first job of --warm records (100
batches) lets the server's JIT compiler settle before the virtual-task sweep, and a job of its own reads one batch
of each measured topic first (a topic new to the Python workers' consumers cost its first read 0.6-1.0 s), so the
figures are those of a warm server and session.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.batch.coordinator.job_coordinator import JobCoordinator  # noqa: E402
from elasticity.config import validate  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.producer import send  # noqa: E402
from elasticity.local.broker import EmbeddedBroker, free_port  # noqa: E402
from elasticity.local.connect_server import SparkConnectServer  # noqa: E402
from elasticity.spark.target import SparkTarget  # noqa: E402

LOOKUP_MS = 20.0  # the enrichment app's default lookup


class Bench:
    def __init__(self, home: Path, bootstrap: str, remote: str) -> None:
        self.home, self.bootstrap, self.remote = home, bootstrap, remote
        self.runs = 0

    def engine(self, session: str, topic: str, factor: int, app: str, **extra: str):
        """A fresh job (its own store and sinks) in the Connect session `session`, whose Python workers stay warm."""
        from elasticity.spark.engine import MicroBatchEngine
        from elasticity.spark.session import session as spark_session

        self.runs += 1
        folder = self.home / f"run-{self.runs}"
        config = validate(
            {
                "job.name": session,
                "task.inputs": f"kafka.{topic}",
                "job.elasticity.factor": str(factor),
                "app.class": app,
                "systems.kafka.default.stream.samza.offset.default": "oldest",
                "batch.max.records": "3000",
                "task.checkpoint.store.url": f"sqlite:///{folder}.db",
                "job.output.path": f"{folder}/out",
                "job.audit.path": f"{folder}/audit",
                "job.dead.letter.path": f"{folder}/dlq",
                **extra,
            }
        )
        return MicroBatchEngine(config, spark_session(config, target=SparkTarget("connect", self.remote, "bench")))

    def topic(self, name: str, partitions: int, records: int, hot: float = 0.0, keys: int = 3000) -> str:
        create_topic(self.bootstrap, name, partitions)
        send(self.bootstrap, name, demo_records(records, keys=keys, null_key_every=0, hot_key_share=hot, seed=7))
        return name


def files_per_batch(config, batch_id: int) -> int:
    roots = [Path(config.get("job.audit.path")), Path(config.get("job.dead.letter.path"))]
    roots += [p for p in Path(config.get("job.output.path")).iterdir() if p.is_dir()]
    return sum(len(list(r.glob(f"batch-{batch_id:012d}-*.parquet"))) for r in roots)


SHAPES = {8: (4, 2), 256: (32, 8), 4096: (128, 32)}  # virtual tasks: partitions x factor


def spy(folder: Path, label: str) -> list[subprocess.Popen]:
    """py-spy on this driver (every thread, idle too) and on the Connect server's Python workers (GIL holders)."""
    import psutil

    folder.mkdir(parents=True, exist_ok=True)
    pyspy = shutil.which("py-spy") or Path(sys.executable).with_name("py-spy")
    me = psutil.Process()
    server = next(p for p in psutil.process_iter(["cmdline"]) if "SparkConnectServer" in " ".join(p.info["cmdline"] or []))
    workers = [q.pid for q in server.children(recursive=True) if q.name().startswith("python")]
    targets = [(me.pid, "driver", ["--idle", "--threads"])] + [(pid, "worker", ["--gil"]) for pid in workers]
    return [
        subprocess.Popen(
            [
                str(pyspy),
                "record",
                "--pid",
                str(pid),
                "--rate",
                "200",
                "--format",
                "raw",
                *flags,
                "-o",
                str(folder / f"{label}-{kind}-{pid}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid, kind, flags in targets
    ]


def vtask_sweep(
    b: Bench, records: int, vtasks: list[int], warm_records: int, profile: Path | None = None
) -> list[tuple[str, str, str]]:
    shapes = [SHAPES[n] for n in vtasks]
    medians: dict[int, dict[str, float]] = {}
    rows = []
    warm = b.engine("vtasks", b.topic("vt-warm", 4, warm_records), 2, "elasticity.apps.identity:build")
    warm.run(until_caught_up=True)  # the Python workers, the driver's imports and the server's JIT, before any figure
    for partitions, factor in shapes:
        tasks = partitions * factor
        topic = b.topic(f"vt-{tasks}", partitions, records)
        warm = b.engine("vtasks", topic, factor, "elasticity.apps.identity:build")
        warm.run(max_records=300)  # a job of its own, one batch of the topic: the workers' consumers know it
        engine = b.engine("vtasks", topic, factor, "elasticity.apps.identity:build")
        spies = spy(profile, f"vt{tasks}") if profile else []
        time.sleep(1 if spies else 0)  # py-spy attached
        start = time.perf_counter()
        batches = [s for s in engine.run(until_caught_up=True) if s.batch_id is not None]
        run_s = time.perf_counter() - start
        for p in spies:
            p.send_signal(2)
            p.wait()
        assert sum(s.processed for s in batches) == records, [s.processed for s in batches]
        m = {k: statistics.median(s.durations_ms.get(k, 0.0) for s in batches) for k in batches[0].durations_ms}
        m["files"] = statistics.median(files_per_batch(engine.config, s.batch_id) for s in batches)
        m["rate"] = records / run_s
        start = time.perf_counter()
        (empty,) = engine.run()
        m["empty"] = (time.perf_counter() - start) * 1000
        assert empty.batch_id is None
        start = time.perf_counter()
        JobCoordinator(engine.config, engine.store, engine.inputs).rescale(2 * factor)
        m["rescale"] = (time.perf_counter() - start) * 1000
        medians[tasks] = m
        rows.append(
            (
                f"{tasks:,} vtasks ({partitions} x {factor}): one batch of 3,000",
                f"{m['total']:,.0f} ms, run {m['rate']:,.0f} rec/s",
                f"plan {m['plan']:,.0f}, Spark {m['spark']:,.0f} (read {m['read']:,.0f}, process {m['process']:,.0f}), checkpoints "
                f"{m['checkpoint']:,.0f}, commit {m['commit']:,.0f} ms; {m['files']:.0f} files; empty run "
                f"{m['empty']:,.0f} ms; rescale to {2 * tasks:,} {m['rescale']:,.0f} ms",
            )
        )
    if not {8, 4096} <= medians.keys():
        return rows
    small, big = medians[8], medians[4096]
    rows.append(
        (
            "batch at 4,096 vtasks over 8",
            f"{big['total']:,.0f} vs {small['total']:,.0f} ms",
            f"{big['total'] / small['total']:.2f}x (goal <= 2x); empty run {big['empty'] / 1000:.2f} s (goal <= 1 s), "
            f"rescale to 8,192 {big['rescale'] / 1000:.2f} s (goal <= 2 s)",
        )
    )
    return rows


def factor_run(b: Bench, topic: str, records: int, factor: int, **extra: str) -> tuple[float, float, float]:
    """A fresh job drained in batches of 3,000: records/s over its batches, and the share of its slowest-task
    limit reached by the process stage and by the whole batch."""
    engine = b.engine("factors", topic, factor, "elasticity.apps.enrichment:build", **extra)
    batches = [s for s in engine.run(until_caught_up=True) if s.batch_id is not None]
    assert sum(s.processed for s in batches) == records
    limit_s = sum(max(s.metrics["records"].values()) for s in batches) * LOOKUP_MS / 1000
    process_s = sum(s.durations_ms["process"] for s in batches) / 1000
    batch_s = sum(s.durations_ms["total"] for s in batches) / 1000
    return records / batch_s, records / limit_s, limit_s / process_s


def factor_sweep(b: Bench, records: int, factors: list[int], pools: list[int]) -> list[tuple[str, str, str]]:
    rows = []
    for hot in (0.0, 0.1):
        topic = b.topic(f"orders-{int(hot * 100)}", 4, records, hot=hot)
        warm = b.engine("factors", topic, 2, "elasticity.apps.enrichment:build")
        warm.run(max_records=200)  # a job of its own, one batch of the topic: the workers' consumers know it
        runs = [(f, {}) for f in factors] + (
            [(factors[-1], {"job.container.thread.pool.size": str(n)}) for n in pools] if not hot else []
        )
        base = None
        for factor, extra in runs:
            rate, limit, process_share = factor_run(b, topic, records, factor, **extra)
            base = base or rate
            pool = f", pool {extra['job.container.thread.pool.size']}" if extra else ""
            rows.append(
                (
                    f"F={factor} ({4 * factor} vtasks){pool}{', 10% hot key' if hot else ''}",
                    f"{rate:,.0f} rec/s (limit {limit:,.0f})",
                    f"{rate / base:.2f}x F={factors[0]}; {rate / limit:.0%} of the limit (process stage {process_share:.0%})",
                )
            )
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=12_000, help="records of each factor sweep run")
    p.add_argument("--vtask-records", type=int, default=24_000, help="records of each virtual-task sweep run (8 batches)")
    p.add_argument(
        "--warm",
        type=int,
        default=300_000,
        help="records of a first job (100 batches) before the virtual-task sweep: the server's JIT compiler settles",
    )
    p.add_argument("--vtasks", default="8,256,4096", help="virtual-task counts of the sweep (of 8, 256, 4096)")
    p.add_argument("--profile", type=Path, help="py-spy the virtual-task sweep's measured runs into this folder")
    p.add_argument("--factors", default="2,4,8,16,32,64")
    p.add_argument("--pools", default="64", help="job.container.thread.pool.size values also run at the highest factor")
    p.add_argument("--skip-vtasks", action="store_true")
    p.add_argument("--skip-factors", action="store_true")
    args = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="elasticity-vtask-bench-"))
    os.environ["ELASTICITY_HOME"] = str(home)
    broker, server = EmbeddedBroker(home), SparkConnectServer(home)
    bootstrap = broker.start(port=free_port()).bootstrap
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    remote = server.start(port=free_port(), master="local[2]").remote
    b = Bench(home, bootstrap, remote)
    rows: list[tuple[str, str, str]] = []
    try:
        if not args.skip_vtasks:
            rows += vtask_sweep(b, args.vtask_records, [int(n) for n in args.vtasks.split(",")], args.warm, args.profile)
        if not args.skip_factors:
            pools = [int(n) for n in args.pools.split(",") if n]
            rows += factor_sweep(b, args.records, [int(f) for f in args.factors.split(",")], pools)
    finally:
        server.stop()
        broker.stop()
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure':{width}s} | {'figures':34s} | ratio / breakdown")
    print(f"{'-' * width}-|-{'-' * 34}-|------")
    for name, fig, ratio in rows:
        print(f"{name:{width}s} | {fig:34s} | {ratio}")
    return 0


if __name__ == "__main__":
    import results

    sys.exit(results.run("vtask_bench", main))
