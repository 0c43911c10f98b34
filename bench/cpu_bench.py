"""CPU benchmark: what the engine spends per record, over the whole process tree, beside a per-record
Python stream library doing the same work on the same broker, measured side by side in one run.

  1. the demo app without its store (`enrichment:build`) and the stateful demo app (`enrichment:build_stateful`:
     running totals per user in RocksDB backed up to the blob store), the lookup at 0 ms: records/s and
     CPU-seconds per 1,000 records, warm (a first backlog of 100 batches warms the job's Connect session, its
     Python workers and the server's JIT compiler)
  2. the same stateful job on Quix Streams (bench/quix_peer.py, in .venv/quix: `make bench-quix`), CPU-bound
     (0 ms) and I/O-bound (--io-ms, a sleep per record), against the engine on the same data

The engine runs as users run it: the job's driver here (a Connect client, as `elasticity run-batch` is) and a
warm Spark Connect server on local[2] (the JVM, its Python workers). CPU is utime+stime from /proc of every
process of that tree (the broker, shared by both sides, is left out), before and after; Quix's is its one
process's, from its first record to its last. Same topic layout (4 partitions), same records (demo orders of
3,000 users, no null keys), same batches for the engine as the demo job's (batch.max.records=3000, factor 2,
2 containers, a pool of 64).

usage: .venv/bin/python bench/cpu_bench.py [--records 30000] [--io-ms 20] [--io-records 3000] [--no-quix]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "include"))

from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.config import validate  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.producer import send  # noqa: E402
from elasticity.local.broker import EmbeddedBroker  # noqa: E402
from elasticity.local.connect_server import SparkConnectServer  # noqa: E402
from elasticity.local.daemon import free_port  # noqa: E402

PARTITIONS = 4
USERS = 3000
QUIX_PYTHON = REPO / ".venv" / "quix" / "bin" / "python"


def tree_cpu(server_pid: int) -> dict[int, float]:
    """utime+stime of this process (the job's driver) and of every live process of the server's tree: pid -> s."""
    me = psutil.Process()
    try:
        server = psutil.Process(server_pid)
        procs = [server, *server.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    out: dict[int, float] = {}
    for q in (me, *procs):
        try:
            t = q.cpu_times()
            out[q.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return out


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two snapshots (a process that started meanwhile counts whole)."""
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


def component(pid: int) -> str:
    """driver (this process), jvm, or python worker (PySpark's daemon and the workers it forks)."""
    if pid == os.getpid():
        return "driver"
    try:
        return "jvm" if psutil.Process(pid).name() == "java" else "python workers"
    except psutil.NoSuchProcess:
        return "gone"


def jvm_threads(server_pid: int) -> dict[str, float]:
    """The JVM's CPU by thread name (as `top -H` shows it), names with their numbers dropped."""
    out: dict[str, float] = {}
    for q in [psutil.Process(server_pid), *psutil.Process(server_pid).children(recursive=True)]:
        if q.name() != "java":
            continue
        for t in q.threads():
            try:
                name = Path(f"/proc/{q.pid}/task/{t.id}/comm").read_text().strip()
            except OSError:
                continue
            name = name.rstrip("0123456789-#").strip() or "unnamed"
            out[name] = out.get(name, 0.0) + t.user_time + t.system_time
    return out


def profile(server_pid: int, folder: Path, seconds: float) -> list[subprocess.Popen]:
    """py-spy on the driver and every Python process of the server's tree (raw collapsed stacks, --gil off:
    every thread's samples, idle ones left out)."""
    pyspy = Path(sys.executable).with_name("py-spy")
    pids = [os.getpid()] + [q.pid for q in psutil.Process(server_pid).children(recursive=True) if q.name().startswith("python")]
    return [
        subprocess.Popen(
            [
                str(pyspy),
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(int(seconds)),
                "--rate",
                "200",
                "--format",
                "raw",
                "--threads",
                "--gil",
                "-o",
                str(folder / f"{component(pid).replace(' ', '-')}-{pid}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in pids
    ]


def job(home: Path, topic: str, app: str, stateful: bool):
    name = f"cpu-{uuid.uuid4().hex[:6]}"
    props = {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "job.container.count": "2",
        "job.container.thread.pool.size": "64",
        "app.class": f"elasticity.apps.enrichment:{app}",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "batch.max.records": "3000",
        "task.checkpoint.store.url": f"sqlite:///{home}/{name}.db",
        "job.output.path": f"{home}/{name}/out",
        "job.audit.path": f"{home}/{name}/audit",
        "job.dead.letter.path": f"{home}/{name}/dlq",
        "task.checkpoint.read.versions": "2,1",
    }
    if stateful:
        props["stores.totals.backup.factories"] = "blobstore"
    return validate(props)


def engine_run(
    home: Path, bootstrap: str, remote: str, server_pid: int, app: str, records: int, warm: int, prof: Path | None = None
) -> dict:
    """A warm-up backlog, then `records` more through one run until caught up: records/s and CPU of the tree."""
    from elasticity.spark.engine import MicroBatchEngine
    from elasticity.spark.session import session
    from elasticity.spark.target import SparkTarget

    topic = f"{app}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    config = job(home, topic, app, stateful=app == "build_stateful")
    engine = MicroBatchEngine(config, session(config, target=SparkTarget("connect", remote, "bench")))
    try:
        send(bootstrap, topic, demo_records(warm, keys=USERS, seed=1, null_key_every=0, hot_key_share=0))
        engine.run(until_caught_up=True)
        send(bootstrap, topic, demo_records(records, keys=USERS, seed=2, null_key_every=0, hot_key_share=0))
        spies = profile(server_pid, prof, records / 1500) if prof else []
        time.sleep(1 if spies else 0)  # py-spy attached
        before, threads = tree_cpu(server_pid), jvm_threads(server_pid)
        start = time.perf_counter()
        summaries = engine.run(until_caught_up=True)
        wall = time.perf_counter() - start
        after, threads_after = tree_cpu(server_pid), jvm_threads(server_pid)
        for spy in spies:
            spy.wait()
    finally:
        engine.spark.client.close()
    done = sum(s.processed for s in summaries)
    assert done == records, f"{app}: processed {done} of {records}"
    by: dict[str, float] = {}
    for pid, t in after.items():
        by[component(pid)] = by.get(component(pid), 0.0) + t - before.get(pid, 0.0)
    jvm = {n: t - threads.get(n, 0.0) for n, t in threads_after.items() if t - threads.get(n, 0.0) > 0.05}
    keys = ("plan", "spark", "read", "process", "checkpoint", "commit", "total")
    avg = {k: round(sum(x.durations_ms.get(k, 0) for x in summaries) / len(summaries)) for k in keys}
    print(f"  {app}: {len(summaries)} batches, ms per batch on average: {json.dumps(avg)}", flush=True)
    print(f"  {app}: CPU-s by process: {json.dumps({k: round(v, 2) for k, v in by.items()})}", flush=True)
    sources = Counter(
        m["restored-from"]
        for x in summaries
        for stores in x.metrics.get("stores", {}).values()
        for m in stores.values()
        if "restored-from" in m
    )
    if sources:  # "open": a warm batch found the store open in its process; others reopened or rebuilt it
        print(f"  {app}: stores per (task, batch), where each batch found them: {json.dumps(dict(sources))}", flush=True)
    print(
        f"  {app}: JVM CPU-s by thread: {json.dumps({k: round(v, 2) for k, v in sorted(jvm.items(), key=lambda kv: -kv[1])})}",
        flush=True,
    )
    return {"records": records, "wall_s": wall, "cpu_s": spent(before, after), "batches": len(summaries)}


def quix_run(bootstrap: str, home: Path, records: int, lookup_ms: float) -> dict:
    topic = f"quix-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    send(bootstrap, topic, demo_records(records, keys=USERS, seed=2, null_key_every=0, hot_key_share=0))
    state = home / f"{topic}-state"
    args = [str(QUIX_PYTHON), str(REPO / "bench" / "quix_peer.py"), bootstrap, topic, str(records), str(lookup_ms), str(state)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=1800, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"quix_peer failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def row(name: str, r: dict) -> tuple[str, str, str]:
    return (
        name,
        f"{r['records'] / r['wall_s']:,.0f} rec/s",
        f"{1000 * r['cpu_s'] / r['records']:.3f} CPU-s/1000 ({r['cpu_s']:.1f} CPU-s, {r['wall_s']:.1f} s wall)",
    )


def start_server(home: Path, lookup_ms: float, conf: dict[str, str]) -> tuple[SparkConnectServer, str, int]:
    server = SparkConnectServer(home / f"spark-{lookup_ms:g}")
    state = server.start(port=free_port(), master="local[2]", conf=conf, env={"DEMO_LOOKUP_MS": f"{lookup_ms:g}"})
    return server, state.remote, state.pid


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=30_000, help="records of each CPU-bound run (0 ms lookup)")
    p.add_argument(
        "--warm",
        type=int,
        default=300_000,
        help="records of the warm-up backlog before each engine run: 100 of the job's batches, the server's JIT settles "
        "(a fresh server's C1 compiled for about 50 batches; after 10, its threads still took 0.15-0.62 CPU-s of the run)",
    )
    p.add_argument("--io-ms", type=float, default=20, help="the lookup of the I/O-bound comparison (0: none)")
    p.add_argument("--io-records", type=int, default=3_000, help="records of the I/O-bound comparison")
    p.add_argument("--no-quix", action="store_true", help="the engine alone")
    p.add_argument("--only", choices=("stateless", "stateful"), help="one of the two engine apps at 0 ms")
    p.add_argument("--server-conf", action="append", default=[], help="k=v: a Spark conf of the server (to compare)")
    p.add_argument("--profile", type=Path, help="py-spy every Python process of the 0 ms runs into this folder")
    args = p.parse_args()
    if not args.no_quix and not QUIX_PYTHON.exists():
        sys.exit(f"{QUIX_PYTHON} is missing: run `make bench-quix` (or pass --no-quix)")
    home = Path(tempfile.mkdtemp(prefix="elasticity-cpu-bench-"))
    os.environ["ELASTICITY_HOME"] = str(home)
    os.environ.setdefault("PYSPARK_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    broker = EmbeddedBroker(home)
    bootstrap = broker.start(port=free_port()).bootstrap
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    rows: list[tuple[str, str, str]] = []
    servers = []
    try:
        conf = dict(kv.split("=", 1) for kv in args.server_conf)
        server, remote, pid = start_server(home, 0, conf)
        servers.append(server)
        apps = {"stateless": "build", "stateful": "build_stateful"}
        results = {}
        for label, app in apps.items():
            if args.only and args.only != label:
                continue
            prof = args.profile / label if args.profile else None
            if prof:
                prof.mkdir(parents=True, exist_ok=True)
            results[label] = engine_run(home, bootstrap, remote, pid, app, args.records, args.warm, prof)
            rows.append(row(f"engine, {label} demo app ({app}), 0 ms", results[label]))
            print(*rows[-1], sep=" | ", flush=True)
        if not args.no_quix:
            quix = quix_run(bootstrap, home, args.records, 0)
            rows.append(row("Quix Streams 3.28, the stateful job, 0 ms", quix))
            if "stateful" in results:
                ours = results["stateful"]
                rows.append(
                    (
                        "engine over Quix, stateful, 0 ms",
                        f"{(ours['records'] / ours['wall_s']) / (quix['records'] / quix['wall_s']):.2f}x rec/s",
                        f"{ours['cpu_s'] / quix['cpu_s']:.2f}x the CPU per record",
                    )
                )
            if args.io_ms:
                server.stop()
                server, remote, pid = start_server(home, args.io_ms, conf)
                servers.append(server)
                ours = engine_run(home, bootstrap, remote, pid, "build_stateful", args.io_records, args.io_records)
                quix = quix_run(bootstrap, home, args.io_records, args.io_ms)
                rows.append(row(f"engine, stateful, {args.io_ms:g} ms lookup", ours))
                rows.append(row(f"Quix Streams 3.28, stateful, {args.io_ms:g} ms lookup", quix))
                rows.append(
                    (
                        f"engine over Quix, stateful, {args.io_ms:g} ms",
                        f"{(ours['records'] / ours['wall_s']) / (quix['records'] / quix['wall_s']):.2f}x rec/s",
                        f"{ours['cpu_s'] / quix['cpu_s']:.2f}x the CPU per record",
                    )
                )
    finally:
        for s in servers:
            s.stop()
        broker.stop()
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure'.ljust(width)} | figure          | notes")
    for name, figure, note in rows:
        print(f"{name.ljust(width)} | {figure:<15} | {note}")
    return 0


if __name__ == "__main__":
    import results

    sys.exit(results.run("cpu_bench", main))
