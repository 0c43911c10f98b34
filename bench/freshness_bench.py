"""Freshness through Airflow's scheduler: from when a record is sent to when its output file first appears.

Two copies of one job side by side in one `airflow standalone` (the embedded broker, a warm Spark Connect
server on local[2]), each on its own topic fed the same records at the same moments: one scheduled by its lag
(`airflow.microbatch.trigger=lag`, the triggerer watching it), one by the minute
(`airflow.microbatch.trigger=schedule`, every minute). Three phases:

  1. steady: `--rate` records/s for `--minutes`: p50, p99 and max freshness, every record seen once
  2. quiet: `--singles` single records 15 to 45 s apart: a record alone waits for its run
  3. idle: nothing for `--idle` seconds: DAG runs started, and the triggerer's CPU (the watchers' upper bound)

usage: python bench/freshness_bench.py [--rate 50] [--minutes 3] [--singles 6] [--idle 120]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "include"))
os.environ.setdefault("ELASTICITY_PROJECT_DIR", str(REPO))

import pyarrow.parquet as pq  # noqa: E402
from kafka import KafkaProducer  # noqa: E402

from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.local.broker import EmbeddedBroker  # noqa: E402
from elasticity.local.connect_server import SparkConnectServer  # noqa: E402
from elasticity.local.daemon import free_port  # noqa: E402
from elasticity.local.standalone import AirflowStandalone, connections  # noqa: E402

MODES = ("lag", "schedule")
PARTITIONS = 4


def job_config(folder: Path, mode: str) -> str:
    return "\n".join(
        [
            f"job.name=fresh_{mode}",
            f"task.inputs=kafka.fresh-{mode}",
            "app.class=elasticity.apps.identity:build",
            "job.elasticity.factor=2",
            "systems.kafka.default.stream.samza.offset.default=oldest",
            f"airflow.microbatch.trigger={mode}",
            "airflow.microbatch.schedule=*/1 * * * *",
            f"job.output.path={folder}/out-{mode}",
            f"job.audit.path={folder}/audit-{mode}",
            f"job.dead.letter.path={folder}/dlq-{mode}",
            f"job.report.path={folder}/reports-{mode}",
            "",
        ]
    )


class OutputWatch(threading.Thread):
    """When each record id first appears in a job's output files (polled every 100 ms)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.seen, self.files, self.stopped = folder, {}, set(), threading.Event()
        self.duplicates = 0

    def run(self) -> None:
        while not self.stopped.is_set():
            now = time.time()
            for path in sorted(self.folder.rglob("*.parquet")) if self.folder.exists() else ():
                if path in self.files or path.name.startswith("."):
                    continue
                try:
                    values = pq.read_table(path, columns=["value"]).column("value").to_pylist()
                except Exception:  # a file being written: the next poll reads it
                    continue
                self.files.add(path)
                for v in values:
                    rid = json.loads(v)["id"]
                    if rid in self.seen:
                        self.duplicates += 1
                    else:
                        self.seen[rid] = now
            time.sleep(0.1)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else float("nan")


def triggerer_cpu_s() -> float:
    """CPU seconds of this machine's Airflow triggerer processes (user + system), from /proc."""
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"triggerer" not in (proc / "cmdline").read_bytes():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=50.0, help="records/s of the steady phase")
    p.add_argument("--minutes", type=float, default=3.0, help="length of the steady phase")
    p.add_argument("--singles", type=int, default=6, help="single records of the quiet phase")
    p.add_argument("--idle", type=float, default=120.0, help="seconds of the idle phase")
    args = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="elasticity-freshness-bench-"))
    broker, spark = EmbeddedBroker(home), SparkConnectServer(home)
    bootstrap = broker.start(port=free_port()).bootstrap
    remote = spark.start(port=free_port(), master="local[2]").remote
    (home / "jobs").mkdir()
    for mode in MODES:
        create_topic(bootstrap, f"fresh-{mode}", PARTITIONS)
        (home / "jobs" / f"fresh_{mode}.properties").write_text(job_config(home, mode))
    store_url = f"sqlite:///{home / 'checkpoints.db'}"
    airflow = AirflowStandalone(
        home / "airflow",
        free_port(),
        {
            **connections(bootstrap, remote, store_url),
            "ELASTICITY_JOBS_DIR": str(home / "jobs"),
            "ELASTICITY_HOME": str(home),
            "KAFKA_BOOTSTRAP_SERVERS": None,
            "ELASTICITY_CHECKPOINT_STORE_URL": None,
        },
    )
    watches = {m: OutputWatch(home / f"out-{m}") for m in MODES}
    sent: dict[int, float] = {}
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks=1)
    next_id = iter(range(10**9))

    def send_one() -> int:
        rid = next(next_id)
        value = json.dumps({"id": rid}).encode()
        sent[rid] = time.time()
        for m in MODES:
            producer.send(f"fresh-{m}", key=f"k-{rid % 97}".encode(), value=value)
        producer.flush()
        return rid

    def wait_seen(ids: list[int], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not all(i in w.seen for w in watches.values() for i in ids):
            time.sleep(0.5)

    def freshness(mode: str, ids: list[int]) -> list[float]:
        seen = watches[mode].seen
        return [seen[i] - sent[i] for i in ids if i in seen]

    print(f"state in {home}; Airflow log {airflow.log_file}", flush=True)
    try:
        airflow.start().wait_ready()
        api = airflow.api()
        for m in MODES:
            api.wait_dag(f"elastic_microbatch__fresh_{m}")
            api.unpause(api.wait_dag(f"elastic_data_quality__fresh_{m}")["dag_id"], paused=True)  # the batch path
        for w in watches.values():
            w.start()
        warm = [send_one() for _ in range(20)]  # the jobs' first runs start their Connect sessions
        wait_seen(warm, 300)
        time.sleep(5)

        steady: list[int] = []
        start = time.monotonic()
        while time.monotonic() - start < args.minutes * 60:
            steady.append(send_one())
            time.sleep(max(0.0, len(steady) / args.rate - (time.monotonic() - start)))
        wait_seen(steady, 180)

        quiet: list[int] = []
        rng = random.Random(7)
        for _ in range(args.singles):
            time.sleep(rng.uniform(15, 45))
            quiet.append(send_one())
        wait_seen(quiet, 120)
        time.sleep(10)

        runs_before = {m: len(api.runs(f"elastic_microbatch__fresh_{m}")) for m in MODES}
        cpu_before, t0 = triggerer_cpu_s(), time.monotonic()
        time.sleep(args.idle)
        cpu_idle = (triggerer_cpu_s() - cpu_before) / (time.monotonic() - t0)
        idle_runs = {m: len(api.runs(f"elastic_microbatch__fresh_{m}")) - runs_before[m] for m in MODES}

        rows = []
        for m in MODES:
            f = freshness(m, steady)
            q = freshness(m, quiet)
            rows.append(
                (
                    f"{m}: steady {args.rate:g}/s for {args.minutes:g} min",
                    f"p50 {pct(f, 0.5):.1f} s, p99 {pct(f, 0.99):.1f} s, max {max(f, default=float('nan')):.1f} s",
                    f"{len(f):,} of {len(steady):,} records seen, {watches[m].duplicates} seen twice",
                )
            )
            rows.append(
                (
                    f"{m}: {len(quiet)} single records 15-45 s apart",
                    f"p50 {pct(q, 0.5):.1f} s, max {max(q, default=float('nan')):.1f} s",
                    f"{len(q)} of {len(quiet)} seen",
                )
            )
            rows.append((f"{m}: DAG runs started in {args.idle:.0f} s idle", str(idle_runs[m]), ""))
        lag, cron = (freshness(m, steady) for m in MODES)
        rows.append(("steady p99: lag over schedule", f"{pct(lag, 0.99) / pct(cron, 0.99):.2f}x", "goal: lag p99 <= 10 s"))
        lq, cq = (freshness(m, quiet) for m in MODES)
        rows.append(("single records p50: lag over schedule", f"{pct(lq, 0.5) / pct(cq, 0.5):.2f}x", ""))
        rows.append(
            (
                "the triggerer's CPU while idle (all its triggers)",
                f"{100 * cpu_idle:.1f} % of one core",
                "goal: the watcher <= 2 %; an upper bound: the triggerer's own loop counts too",
            )
        )
        width = max(len(r[0]) for r in rows)
        print(f"\n{'measure'.ljust(width)} | figure | notes")
        for name, figure, note in rows:
            print(f"{name.ljust(width)} | {figure} | {note}")
    finally:
        for w in watches.values():
            w.stopped.set()
        producer.close()
        airflow.stop()
        spark.stop()
        broker.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import results

    sys.exit(results.run("freshness_bench", main))
