"""Long-run benchmark: is every recurring cost flat in the job's age, and what the job keeps on disk bounded?

Two jobs on one 4-partition topic of demo orders, as users run them (a warm Spark Connect server on local[2],
the embedded broker, a SQLite checkpoint store): the stateful demo app (running totals per user, blob-store
backups) and an exactly-once copy to a Kafka topic. Time is compressed: a micro-batch of each job per step,
`--records` new orders per step, an incremental data-quality run (as its DAG runs it: the batches since the
last validated one) every `--dq-every` batches, and the maintenance DAG's work (`elasticity.maintenance`)
every `--maintain-every` batches, under the default retention. It prints, side by side in one run:

  1. the data-quality run over the same number of new batches, young (at `--young`) and at the end;
  2. files and bytes each job keeps on disk, every 500 batches (outputs, audit, dead letters, reports,
     state and blob store, the checkpoint database);
  3. the job page and the data-quality index rendered young and old;

and draws the curve (`--svg`, default docs/long-run.svg) for the Performance page.

usage: python bench/long_run.py [--batches 5000] [--records 40] [--dq-every 50] [--maintain-every 60]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO / "bench")]

from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.config import JobConfig, validate  # noqa: E402
from elasticity.daemon import free_port  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.broker import EmbeddedBroker  # noqa: E402
from elasticity.spark.server import SparkConnectServer  # noqa: E402

PARTITIONS = 4
USERS = 300
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
    engine: object
    dq: list[tuple[int, float, int]] = field(default_factory=list)  # (batch, seconds, batches validated)
    disk: list[tuple[int, int, int]] = field(default_factory=list)  # (batch, files, bytes)
    pages: dict[str, tuple[float, float]] = field(default_factory=dict)  # age -> (job page s, dq index s)
    maintenance_s: list[float] = field(default_factory=list)


def render_times(j: Job, repeat: int = 5) -> tuple[float, float]:
    """The job page (its view read from the store, rendered) and the data-quality index, best of `repeat`."""
    from elasticity.quality.history import run_summaries
    from elasticity.quality.report import index_html
    from elasticity.views.jobview import build_view
    from elasticity.views.page import render

    engine = j.engine
    reports = Path(j.config.path("job.report.path", "reports"))
    page, index = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        render(build_view(j.config, engine.store, engine.inputs))
        page.append(time.perf_counter() - t)
        t = time.perf_counter()
        index_html(j.name, run_summaries(reports), engine.store.metrics(j.name, limit=200))
        index.append(time.perf_counter() - t)
    return min(page), min(index)


def maintain(j: Job) -> None:
    try:
        from elasticity.maintenance import maintain as run_maintenance
    except ImportError:  # a version without the maintenance DAG's library
        return
    t = time.perf_counter()
    run_maintenance(j.config, j.engine.store, now_ms=int(time.time() * 1000))
    j.maintenance_s.append(time.perf_counter() - t)


def svg(jobs: list[Job], every: int, path: Path) -> None:
    """Two panels drawn by hand (no plotting library on the machine): data-quality seconds per run, and files kept on
    disk, against the job's age in batches."""
    width, height, pad = 720, 250, 46
    colors = ["#1f77b4", "#d62728"]

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
                f'<text x="4" y="{at(0, ymax / 1.15 * frac).split(",")[1]}" font-size="11">{ymax / 1.15 * frac:.3g}{unit}</text>'
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
        [(j.name, [(b, s) for b, s, _ in j.dq]) for j in jobs],
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
    p.add_argument("--young", type=int, default=100, help="the age (batches) of the young measurement")
    p.add_argument("--svg", type=Path, default=REPO / "docs" / "long-run.svg")
    args = p.parse_args()

    from kafka import KafkaProducer

    from elasticity.quality.runner import run_quality
    from elasticity.spark.engine import MicroBatchEngine
    from elasticity.spark.session import session
    from elasticity.spark.target import SparkTarget

    home = Path(tempfile.mkdtemp(prefix="elasticity-long-run-"))
    broker = EmbeddedBroker(home / "broker")
    bootstrap = broker.start(port=free_port()).bootstrap
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    server = SparkConnectServer(home / "spark")
    remote = server.start(port=free_port(), master="local[2]", conf={}, env={"DEMO_LOOKUP_MS": "0"}).remote
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    feed = demo_records(args.batches * args.records + 1, keys=USERS, seed=5)
    jobs = []
    for name, app in APPS.items():
        (home / f"lr-{name}").mkdir()
        config = job(home, f"lr-{name}", topic, app)
        engine = MicroBatchEngine(config, session(config, target=SparkTarget("connect", remote, "bench")))
        jobs.append(Job(config.job_name, config, engine))
    print(
        f"{args.batches:,} batches of {args.records} orders per job, data quality every {args.dq_every}, maintenance every {args.maintain_every}; home {home}",
        flush=True,
    )
    started = time.perf_counter()
    try:
        for b in range(1, args.batches + 1):
            for _ in range(args.records):
                k, v = next(feed)
                producer.send(topic, key=k, value=v)
            producer.flush()
            for j in jobs:
                (summary,) = j.engine.run(max_records=args.records)
                assert summary.batch_id == b, f"{j.name}: batch {summary.batch_id} at step {b}"
            if b % args.dq_every == 0:
                for j in jobs:
                    t = time.perf_counter()
                    result, _ = run_quality(j.config, j.engine.store, j.engine.inputs, incremental=True, run_name=f"b{b:06d}")
                    j.dq.append((b, time.perf_counter() - t, args.dq_every))
                    assert result.success, f"{j.name} at batch {b}: {result.failure_message()}"
            if b % args.maintain_every == 0:
                for j in jobs:
                    maintain(j)
            if b == args.young or b == args.batches:
                for j in jobs:
                    j.pages["young" if b == args.young else "old"] = render_times(j)
            if b % 500 == 0 or b == args.batches:
                for j in jobs:
                    files, size = on_disk(home / j.name)
                    j.disk.append((b, files, size))
                line = ", ".join(
                    f"{j.name} dq {j.dq[-1][1]:.2f} s, {j.disk[-1][1]:,} files, {j.disk[-1][2] / 2**20:.1f} MiB" for j in jobs
                )
                print(f"  batch {b:,} ({time.perf_counter() - started:,.0f} s): {line}", flush=True)
    finally:
        producer.close()
        for j in jobs:
            j.engine.store.close()
        server.stop()
        broker.stop()

    print("\nfigure | young | old | ratio (target)")
    for j in jobs:
        young = next(s for b, s, _ in j.dq if b >= args.young)
        old = j.dq[-1][1]
        print(
            f"{j.name}: data-quality run over {args.dq_every} new batches at batch {args.young:,} vs {j.dq[-1][0]:,} | {young:.2f} s | {old:.2f} s | {old / young:.2f}x (<= 1.3x)"
        )
    for j in jobs:
        (yp, yi), (op, oi) = j.pages["young"], j.pages["old"]
        print(f"{j.name}: job page render | {yp * 1000:.0f} ms | {op * 1000:.0f} ms | {op / yp:.2f}x (<= 1.3x)")
        print(f"{j.name}: data-quality index render | {yi * 1000:.0f} ms | {oi * 1000:.0f} ms | {oi / yi:.2f}x (<= 1.3x)")
    for j in jobs:
        half = next((d for d in j.disk if d[0] >= args.batches // 2), j.disk[0])
        end = j.disk[-1]
        print(
            f"{j.name}: files on disk at batch {half[0]:,} vs {end[0]:,} | {half[1]:,} | {end[1]:,} | {end[1] / half[1]:.2f}x (<= 1.2x)"
        )
        per = ", ".join(f"{b:,}: {f:,} files {s / 2**20:.1f} MiB" for b, f, s in j.disk if b % 1000 == 0)
        print(f"{j.name}: on disk per 1,000 batches: {per}")
        if j.maintenance_s:
            print(
                f"{j.name}: maintenance runs {len(j.maintenance_s)}, median {sorted(j.maintenance_s)[len(j.maintenance_s) // 2]:.2f} s"
            )
    svg(jobs, args.dq_every, args.svg)
    print(f"\ncurve: {args.svg.relative_to(REPO) if args.svg.is_relative_to(REPO) else args.svg}")
    return 0


if __name__ == "__main__":
    import results

    raise SystemExit(results.run("long_run", main))
