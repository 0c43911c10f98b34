"""Long-run benchmark: is every recurring cost flat in the job's age, and what a job keeps on disk bounded?

Two jobs on one 4-partition topic of demo orders, as users run them (a warm Spark Connect server on local[2],
the embedded broker, a SQLite checkpoint store each): the stateful demo app (running totals per user,
blob-store backups) and an exactly-once copy to a Kafka topic. Time is compressed: each step feeds
`--records` orders and runs a micro-batch of each job (the two side by side, as two DAGs would), an
incremental data-quality run (as its DAG runs it: the batches since the last validated one) follows every
`--dq-every` batches, and the maintenance DAG's work (`elasticity.maintenance.maintain`, default retention)
every `--maintain-every` batches.

Young against old, side by side: for the last `--twin` steps a young twin of each job (same app, its own topic
fed the same orders) runs beside it, with data-quality runs often enough that by the end its pages list as much
as the old job's (the latest 50 runs; the charts' last 200 batches): what is left to differ is the job's age. At
the end each pair's data-quality run over the same `--dq-every` new batches (from a copy of its validated edge,
three times, alternating) and its job page and data-quality index are timed in turn, so machine drift shows in
both. It also prints the data-quality time every `--dq-every` batches as the run went, files and bytes each job
keeps on disk every 500 batches (outputs, audit, dead letters, reports, state and blob store, checkpoint
database), and draws the curve (`--svg`).

usage: python bench/long_run.py [--batches 5000] [--records 40] [--dq-every 50] [--maintain-every 60]
About 50 minutes for 5,000 batches on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO / "bench")]

from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.config import JobConfig, validate  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.local.broker import EmbeddedBroker  # noqa: E402
from elasticity.local.connect_server import SparkConnectServer  # noqa: E402
from elasticity.local.daemon import free_port  # noqa: E402

PARTITIONS = 4
USERS = 300
TWIN_DQ_EVERY = 3
APPS = {"stateful": "elasticity.apps.enrichment:build_stateful", "kafka-copy": "elasticity.apps.identity:build_kafka"}


def job(home: Path, name: str, topic: str, app: str) -> JobConfig:
    props = {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "job.container.count": "2",
        "app.class": app,
        "systems.kafka.samza.offset.default": "oldest",
        "task.checkpoint.store.url": f"sqlite:///{home}/{name}/checkpoints.db",
        "task.checkpoint.read.versions": "2,1",
        "job.state.dir": f"{home}/{name}/state",
        "blob.store.uri": f"{home}/{name}/blobs",
        "job.output.path": f"{home}/{name}/output",
        "job.audit.path": f"{home}/{name}/audit",
        "job.dead.letter.path": f"{home}/{name}/dead-letter",
        "job.report.path": f"{home}/{name}/reports",
    }
    if "stateful" in app:
        props["stores.totals.backup.factories"] = "blobstore"
    return validate(props)


def on_disk(folder: Path) -> tuple[int, int]:
    files = size = 0
    for root, _, names in os.walk(folder):
        for n in names:
            files += 1
            size += os.path.getsize(os.path.join(root, n))
    return files, size


@dataclass
class Job:
    name: str
    config: JobConfig
    engine: Any
    topic: str
    dq: list[tuple[int, float]] = field(default_factory=list)  # (batch, seconds)
    disk: list[tuple[int, int, int]] = field(default_factory=list)  # (batch, files, bytes)
    maintenance_s: list[float] = field(default_factory=list)

    @property
    def reports(self) -> Path:
        return self.config.report_dir


def dq_run(j: Job, name: str, report_dir: Path | None = None) -> float:
    from elasticity.quality.runner import run_quality

    t = time.perf_counter()
    result, _ = run_quality(j.config, j.engine.store, j.engine.inputs, report_dir=report_dir, incremental=True, run_name=name)
    assert result.success, f"{j.name} {name}: {result.failure_message()}"
    return time.perf_counter() - t


def dq_from_edge(j: Job, scratch: Path) -> float:
    """The next incremental run, from a copy of the job's report folder: the same window every time."""
    copy = scratch / f"{j.name}-{uuid.uuid4().hex[:6]}"
    shutil.copytree(j.reports, copy)
    try:
        return dq_run(j, "measure", copy)
    finally:
        shutil.rmtree(copy)


def page_times(j: Job) -> tuple[float, float]:
    """The job page (its view read from the store, rendered) and the data-quality index (written as a run does)."""
    from elasticity.quality.report import write_index
    from elasticity.views.jobview import build_view
    from elasticity.views.page import render

    t = time.perf_counter()
    render(build_view(j.config, j.engine.store, j.engine.inputs))
    page = time.perf_counter() - t
    t = time.perf_counter()
    write_index(j.reports, j.name, j.engine.store.metrics(j.name, limit=200))
    return page, time.perf_counter() - t


def maintain(j: Job) -> None:
    from elasticity.maintenance import maintain as run_maintenance

    t = time.perf_counter()
    run_maintenance(j.config, j.engine.store, now_ms=int(time.time() * 1000))
    j.maintenance_s.append(time.perf_counter() - t)


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def svg(jobs: list[Job], every: int, path: Path) -> None:
    """Two panels drawn by hand (no plotting library on the machine): data-quality seconds per run, and files kept on
    disk, against the job's age in batches."""
    width, height, pad = 720, 250, 46
    colors = ["#1f77b4", "#d62728"]

    def label(v: float) -> str:
        return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"

    def panel(y0: int, title: str, series: list[tuple[str, list[tuple[float, float]]]], unit: str) -> str:
        xs = [x for _, pts in series for x, _ in pts] or [1]
        ys = [y for _, pts in series for _, y in pts] or [1]
        xmax, ymax = max(xs), max(ys) * 1.15 or 1

        def at(x: float, y: float) -> str:
            return f"{pad + (width - 2 * pad) * x / xmax:.1f},{y0 + height - pad - (height - 2 * pad) * y / ymax:.1f}"

        out = [f'<text x="{pad}" y="{y0 + 20}" font-size="14">{title}</text>']
        out.append(f'<polyline fill="none" stroke="#999" points="{at(0, ymax)} {at(0, 0)} {at(xmax, 0)}"/>')
        for frac in (0, 0.5, 1):
            out.append(
                f'<text x="4" y="{at(0, ymax / 1.15 * frac).split(",")[1]}" font-size="11">{label(ymax / 1.15 * frac)}{unit}</text>'
            )
            out.append(
                f'<text x="{at(xmax * frac, 0).split(",")[0]}" y="{y0 + height - pad + 16}" font-size="11">{xmax * frac:,.0f}</text>'
            )
        for i, (name, pts) in enumerate(series):
            out.append(
                f'<polyline fill="none" stroke="{colors[i % 2]}" stroke-width="2" points="{" ".join(at(x, y) for x, y in pts)}"/>'
            )
            out.append(f'<text x="{width - 190}" y="{y0 + 20 + 16 * i}" font-size="12" fill="{colors[i % 2]}">{name}</text>')
        return "\n".join(out)

    body = panel(
        0,
        f"data-quality run over {every} new batches (s) by the job's age in batches",
        [(j.name, list(j.dq)) for j in jobs],
        " s",
    )
    body += panel(
        height, "files the job keeps on disk by its age in batches", [(j.name, [(b, f) for b, f, _ in j.disk]) for j in jobs], ""
    )
    path.write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{2 * height}" font-family="sans-serif">\n{body}\n</svg>\n'
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=5000)
    p.add_argument("--records", type=int, default=40, help="new orders per batch")
    p.add_argument("--dq-every", type=int, default=50)
    p.add_argument("--maintain-every", type=int, default=60, help="batches between maintenance runs (hourly at a batch a minute)")
    p.add_argument("--twin", type=int, default=200, help="the young twins' age at the end, in batches")
    p.add_argument("--svg", type=Path, default=REPO / "docs" / "long-run.svg")
    args = p.parse_args()
    assert args.twin % args.dq_every == 0 and args.batches % args.dq_every == 0 and args.twin < args.batches

    from kafka import KafkaProducer

    from elasticity.spark.engine import MicroBatchEngine
    from elasticity.spark.session import session
    from elasticity.spark.target import SparkTarget

    home = Path(tempfile.mkdtemp(prefix="elasticity-long-run-"))
    broker = EmbeddedBroker(home / "broker")
    bootstrap = broker.start(port=free_port()).bootstrap
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    server = SparkConnectServer(home / "spark")
    remote = server.start(port=free_port(), master="local[2]", conf={}, env={"DEMO_LOOKUP_MS": "0"}).remote
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    feed = demo_records(args.batches * args.records + 1, keys=USERS, seed=5)

    def start(name: str, app: str, topic: str) -> Job:
        (home / name).mkdir()
        config = job(home, name, topic, app)
        return Job(name, config, MicroBatchEngine(config, session(config, target=SparkTarget("connect", remote, "bench"))), topic)

    old_topic, young_topic = f"orders-{uuid.uuid4().hex[:6]}", f"orders-young-{uuid.uuid4().hex[:6]}"
    for topic in (old_topic, young_topic):
        create_topic(bootstrap, topic, PARTITIONS)
    jobs = [start(f"lr-{name}", app, old_topic) for name, app in APPS.items()]
    twins: list[Job] = []
    pool = ThreadPoolExecutor(2 * len(APPS))
    print(
        f"{args.batches:,} batches of {args.records} orders per job, data quality every {args.dq_every} batches, maintenance "
        f"every {args.maintain_every}; young twins for the last {args.twin}; home {home}",
        flush=True,
    )
    started = time.perf_counter()
    try:
        for b in range(1, args.batches + 1):
            if b == args.batches - args.twin + 1:
                twins = [start(f"lr-young-{name}", app, young_topic) for name, app in APPS.items()]
            for _ in range(args.records):
                k, v = next(feed)
                for topic in (old_topic, young_topic) if twins else (old_topic,):
                    producer.send(topic, key=k, value=v)
            producer.flush()
            for j, runs in [(j, pool.submit(j.engine.run, max_records=args.records)) for j in jobs + twins]:
                assert len(runs.result()) == 1, f"{j.name}: not one batch at step {b}"
            age = b - (args.batches - args.twin)
            if b % args.dq_every == 0 and b < args.batches:
                for j in jobs:
                    j.dq.append((b, dq_run(j, f"b{b:06d}")))
            if twins and age <= args.twin - args.dq_every and age % TWIN_DQ_EVERY == 0:  # 50 runs, then a window
                for j in twins:
                    dq_run(j, f"b{age:06d}")
            if b % args.maintain_every == 0:
                for j in jobs + twins:
                    maintain(j)
            if b % 500 == 0 or b == args.batches:
                for j in jobs:
                    j.disk.append((b, *on_disk(home / j.name)))
                line = ", ".join(
                    f"{j.name} {j.disk[-1][1]:,} files {j.disk[-1][2] / 2**20:.1f} MiB, dq {j.dq[-1][1]:.2f} s" for j in jobs
                )
                print(f"  batch {b:,} ({time.perf_counter() - started:,.0f} s): {line}", flush=True)

        print(f"\nside by side at the end: each job ({args.batches:,} batches old) and its twin ({args.twin} batches old)")
        scratch = home / "scratch"
        measured: dict[str, dict[str, list[float]]] = {j.name: {"dq": [], "page": [], "index": []} for j in jobs + twins}
        for _ in range(3):
            for j in [x for pair in zip(jobs, twins, strict=True) for x in pair]:
                measured[j.name]["dq"].append(dq_from_edge(j, scratch))
        for _ in range(5):
            for j in [x for pair in zip(jobs, twins, strict=True) for x in pair]:
                page, index = page_times(j)
                measured[j.name]["page"].append(page)
                measured[j.name]["index"].append(index)
    finally:
        producer.close()
        pool.shutdown()
        for j in jobs + twins:
            j.engine.store.close()
        server.stop()
        broker.stop()

    print("figure | young | old | old / young (target)")
    for j, t in zip(jobs, twins, strict=True):
        y, o = measured[t.name], measured[j.name]
        print(
            f"{j.name}: data-quality run over {args.dq_every} new batches, median of 3 | {median(y['dq']):.2f} s | "
            f"{median(o['dq']):.2f} s | {median(o['dq']) / median(y['dq']):.2f}x (<= 1.3x)"
        )
        print(
            f"{j.name}: job page, best of 5 | {min(y['page']) * 1000:.0f} ms | {min(o['page']) * 1000:.0f} ms | "
            f"{min(o['page']) / min(y['page']):.2f}x (<= 1.3x)"
        )
        print(
            f"{j.name}: data-quality index, best of 5 | {min(y['index']) * 1000:.1f} ms | {min(o['index']) * 1000:.1f} ms | "
            f"{min(o['index']) / min(y['index']):.2f}x (<= 1.3x)"
        )
    for j in jobs:
        at = dict((b, s) for b, s in j.dq)
        young = at.get(2 * args.dq_every, j.dq[0][1])
        print(
            f"{j.name}: data-quality run in the run itself at batch {2 * args.dq_every} and {j.dq[-1][0]:,} | {young:.2f} s | "
            f"{j.dq[-1][1]:.2f} s | {j.dq[-1][1] / young:.2f}x (drift included)"
        )
    for j in jobs:
        half = next((d for d in j.disk if d[0] >= args.batches // 2), j.disk[0])
        end = j.disk[-1]
        print(
            f"{j.name}: files on disk at batch {half[0]:,} and {end[0]:,} | {half[1]:,} | {end[1]:,} | {end[1] / half[1]:.2f}x (<= 1.2x)"
        )
        print(
            f"{j.name}: bytes on disk at batch {half[0]:,} and {end[0]:,} | {half[2] / 2**20:.1f} MiB | {end[2] / 2**20:.1f} MiB | "
            f"{end[2] / half[2]:.2f}x"
        )
        per = ", ".join(f"{b:,}: {f:,} files, {s / 2**20:.1f} MiB" for b, f, s in j.disk if b % 1000 == 0)
        print(f"{j.name}: kept on disk every 1,000 batches: {per}")
        if j.maintenance_s:
            print(
                f"{j.name}: {len(j.maintenance_s)} maintenance runs, median {median(j.maintenance_s):.2f} s, longest {max(j.maintenance_s):.2f} s"
            )
    svg(jobs, args.dq_every, args.svg)
    print(f"\ncurve: {args.svg.relative_to(REPO) if args.svg.is_relative_to(REPO) else args.svg}")
    return 0


if __name__ == "__main__":
    import results

    raise SystemExit(results.run("long_run", main))
