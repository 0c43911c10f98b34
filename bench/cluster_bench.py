"""Cluster benchmark: the demo app on a Spark standalone cluster on this machine (`elasticity cluster
start`: workers of one core each, the S3-protocol server as shared storage, the Spark Connect server
attached to the master), every figure measured side by side in one run:

  1. a backlog on one worker vs two workers (the same cores per worker): records/s and the ratio
  2. factor 2 vs factor 8 on two workers: records/s and the ratio, with the backlog in batches of
     `--max-records` and in one batch
  3. a Spark job that does nothing, over the same placed slots: what every batch pays before its work
  4. over 20 batches without a rescale or a fault: how many store restores, and the bytes they downloaded

The demo app (`build_stateful`: running totals per user in a store backed up to the blob store, then a
lookup of DEMO_LOOKUP_MS per record). Its lookups sleep: the two workers share this machine's two cores.

Each measured job first drains a small warm-up backlog of its own (its stores are created, its slots placed),
then the timed backlog, in batches of `--max-records`.

usage: python bench/cluster_bench.py [--backlog 6000] [--max-records 3000] [--lookup-ms 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "include"))

from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.config import validate  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.producer import send  # noqa: E402
from elasticity.local.broker import EmbeddedBroker, free_port  # noqa: E402
from elasticity.local.cluster import ClusterState, LocalCluster  # noqa: E402

PARTITIONS = 4


def job(state: ClusterState, home: Path, topic: str, factor: int, containers: int) -> dict[str, str]:
    name = f"cluster-{uuid.uuid4().hex[:6]}"
    return {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": str(factor),
        "job.container.count": str(containers),
        "job.container.thread.pool.size": "64",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "app.class": "elasticity.apps.enrichment:build_stateful",
        "task.checkpoint.read.versions": "2,1",
        "stores.totals.backup.factories": "blobstore",
        "task.checkpoint.store.url": f"sqlite:///{home / (name + '.db')}",
        **state.job_settings(name),
    }


def drain(props: dict[str, str], max_records: int) -> tuple[float, list]:
    from elasticity.spark.engine import MicroBatchEngine
    from elasticity.spark.session import session

    config = validate(props)
    engine = MicroBatchEngine(config, session(config))
    start = time.perf_counter()
    summaries = engine.run(max_records=max_records, until_caught_up=True)
    return time.perf_counter() - start, summaries


def empty_job_ms(props: dict[str, str], runs: int = 15) -> list[float]:
    """A job that only starts a Python worker per slot and returns a row, on the slots a batch runs on: the part
    of a batch's time that no factor changes (Spark Connect, scheduling, task deserialization, the Python
    worker's round trip)."""
    from elasticity.spark.placement import placed_slots
    from elasticity.spark.session import session

    def nothing(batches):
        yield from batches

    slots = placed_slots(session(validate(props)), 2)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        slots.mapInArrow(nothing, slots.schema).collect()
        times.append((time.perf_counter() - start) * 1000)
    return sorted(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backlog", type=int, default=6000)
    p.add_argument("--max-records", type=int, default=3000)
    p.add_argument("--lookup-ms", type=float, default=20)
    args = p.parse_args()
    os.environ["DEMO_LOOKUP_MS"] = str(args.lookup_ms)  # the workers inherit it
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    home = Path(tempfile.mkdtemp(prefix="elasticity-cluster-bench-"))
    broker = EmbeddedBroker(home)
    bootstrap = broker.start(port=free_port()).bootstrap
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    rows: list[tuple[str, str, str]] = []
    try:
        rates: dict[str, float] = {}
        timed: dict[str, str] = {}
        busiest: dict[str, float] = {}  # per job: the sum over its batches of the busiest virtual task's seconds
        floor: list[float] = []
        for workers in (1, 2):
            cluster = LocalCluster(home / f"workers-{workers}")
            state = cluster.start(workers=workers, cores=1, memory="1g")
            os.environ.update(state.env())
            os.environ["SPARK_REMOTE"] = state.connect or ""
            try:
                topic = f"orders-{workers}"
                create_topic(bootstrap, topic, PARTITIONS)
                runs = [(f, args.max_records) for f in (2, 8)] + [(f, args.backlog) for f in (2, 8)]
                for factor, max_records in runs if workers == 2 else [(8, args.max_records)]:
                    t = f"{topic}-f{factor}-{max_records}"
                    create_topic(bootstrap, t, PARTITIONS)
                    props = job(state, home, t, factor, 2)
                    send(bootstrap, t, demo_records(300, keys=3000, seed=factor, hot_key_share=0))
                    drain(props, 300)  # warm-up: the job's stores exist and its slots are placed
                    send(bootstrap, t, demo_records(args.backlog, keys=3000, seed=10 + factor, hot_key_share=0))
                    elapsed, summaries = drain(props, max_records)
                    key = f"{workers}w F={factor}" + ("" if max_records == args.max_records else " one batch")
                    busiest[key] = 0.0
                    for s in summaries:
                        slowest = max(s.metrics.get("process-ns", {}).values(), default=0) / 1e9
                        busiest[key] += slowest
                        print(f"  {workers}w {s.line()}; busiest task {slowest:.2f} s", flush=True)
                    rates[key] = sum(s.processed for s in summaries) / elapsed
                    timed[key] = (
                        f"{len(summaries)} batches in {elapsed:.1f} s, "
                        f"{sum(s.metrics['state-restores']['count'] for s in summaries)} restores"
                    )
                if workers == 2:
                    floor = empty_job_ms(props)
                    t = f"{topic}-steady"
                    create_topic(bootstrap, t, PARTITIONS)
                    props = job(state, home, t, 4, 2)
                    restores, downloaded, batches = 0, 0, 0
                    for i in range(21):
                        send(bootstrap, t, demo_records(100, keys=3000, seed=100 + i, hot_key_share=0))
                        _, (summary,) = drain(props, 1000)
                        if i:  # after the first
                            restores += summary.metrics["state-restores"]["count"]
                            downloaded += summary.metrics["state-restores"]["bytes"]
                            batches += int(summary.metrics["state-restores"]["count"] > 0)
            finally:
                os.environ.pop("SPARK_REMOTE", None)
                cluster.stop()
        rows += [(f"  {k}: {rates[k]:,.0f} rec/s", v, "") for k, v in timed.items()]
        rows.append(
            (
                "two workers over one, F=8 (1 core each)",
                f"{rates['2w F=8']:,.0f} vs {rates['1w F=8']:,.0f} rec/s",
                f"{rates['2w F=8'] / rates['1w F=8']:.2f}x (goal >= 1.7x)",
            )
        )
        for suffix, batches_of in (("", f"batches of {args.max_records:,}"), (" one batch", f"one batch of {args.backlog:,}")):
            f8, f2 = rates[f"2w F=8{suffix}"], rates[f"2w F=2{suffix}"]
            rows.append(
                (
                    f"factor 8 over factor 2, two workers, {batches_of}",
                    f"{f8:,.0f} vs {f2:,.0f} rec/s",
                    f"{f8 / f2:.2f}x (goal >= 3x)",
                )
            )
            b8, b2 = busiest[f"2w F=8{suffix}"], busiest[f"2w F=2{suffix}"]
            rows.append(("  its limit: batches as long as their busiest task", f"{b2:.1f} s vs {b8:.1f} s", f"{b2 / b8:.2f}x"))
        rows.append(
            (
                "a Spark job that does nothing, on the 2 slots",
                f"median {floor[len(floor) // 2]:.0f} ms ({floor[0]:.0f}-{floor[-1]:.0f}, {len(floor)} jobs)",
                "every batch pays it",
            )
        )
        rows.append(
            (
                "20 batches without a rescale or a fault",
                f"{batches} batches restored {restores} stores, {downloaded:,} bytes",
                f"{batches / 20:.0%} of batches (goal <= 5%)",
            )
        )
    finally:
        broker.stop()
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure'.ljust(width)} | {'figures':40s} | ratio")
    for name, fig, ratio in rows:
        print(f"{name.ljust(width)} | {fig:40s} | {ratio}")
    return 0


if __name__ == "__main__":
    import results

    sys.exit(results.run("cluster_bench", main))
