"""A fault-injection soak through Airflow's real scheduler, on loopback only.

Everything runs side by side on its own state folder: the embedded broker, a warm Spark
Connect server (local[2]), a private PostgreSQL server as the checkpoint store (started
from the system's binaries on a free port, so that it can be restarted), and `airflow
standalone` running the DAGs of one job, `soak` (the demo app: a 20 ms lookup per order).
A producer thread feeds the job continuously (every 50th order without a key, ~1 %
malformed). Meanwhile, as a person and the platform would:

- a manual rescale every few minutes (`elastic_rescale` triggered through the REST API as
  the UI's form does, factor drawn from 1..16), and scheduled rescales
  (`job.elasticity.schedule` flips the factor every 5 minutes; `elastic_scale_schedule`
  applies it unless a manual rescale holds, here for 2 minutes);
- SIGKILL of the running batch task's process (`airflow worker -- <ti id>`);
- a broker restart and a store restart (each down for `--outage` seconds) in the middle.

Then it stops feeding, drains, runs the data-quality DAG over every batch, and prints
records fed, processed, lost, duplicated, reordered (from the committed sinks against the
broker's logs), the faults injected and the time each took to heal (from the fault to the
first batch committed after it ended; a rescale heals at the first batch of its generation).

With `--cluster` (`make soak CLUSTER=1 MINUTES=60`) the jobs run on the local cluster
(`elasticity.local.cluster`: a master, two workers, the S3 server as the sinks' and blobs'
storage, the Connect server as the driver) under its supervisor, Airflow's metadata on a
second private PostgreSQL with the LocalExecutor, and every 1 to 3 minutes a fault drawn
from: an executor, a worker, the driver or the master SIGKILLed (the supervisor starts the
daemon again on its address), the batch task SIGKILLed, the broker or the store restarted.

usage: python bench/soak.py [--minutes 30] [--rate 10] [--seed N] [--cluster]    (make soak MINUTES=30 [CLUSTER=1])
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "include"))
os.environ.setdefault("ELASTICITY_PROJECT_DIR", str(REPO))  # the checkout's dags/ and plugins/, wherever it runs from

from kafka import KafkaProducer  # noqa: E402
from sqlalchemy import select  # noqa: E402

from elasticity.batch.coordinator.lag import lag_report  # noqa: E402
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, OUTPUT_SCHEMA, read_table  # noqa: E402
from elasticity.checkpoint import store as st  # noqa: E402
from elasticity.checkpoint.store import CheckpointStore  # noqa: E402
from elasticity.config import load_config  # noqa: E402
from elasticity.jobmodel.model import SystemStreamPartition  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.consumer import KafkaInputs  # noqa: E402
from elasticity.local.airflow_api import AirflowApi  # noqa: E402
from elasticity.local.broker import EmbeddedBroker  # noqa: E402
from elasticity.local.cluster import LocalCluster  # noqa: E402
from elasticity.local.connect_server import SparkConnectServer  # noqa: E402
from elasticity.local.daemon import free_port  # noqa: E402
from elasticity.local.private_postgres import PrivatePostgres  # noqa: E402
from elasticity.local.standalone import AirflowDb, AirflowStandalone, connections  # noqa: E402
from elasticity.local.supervisor import SupervisorStatus, status_file, supervise  # noqa: E402

JOB = "soak"
TOPIC = "soak-orders"
WORKERS = 2  # of the local cluster (--cluster)
PATHS = {"job.output.path": "out", "job.audit.path": "audit", "job.dead.letter.path": "dlq"}  # under the state folder
PARTITIONS = 4
MICROBATCH = f"elastic_microbatch__{JOB}"
QUALITY = f"elastic_data_quality__{JOB}"


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def now_ms() -> int:
    return int(time.time() * 1000)


class Feeder(threading.Thread):
    """Orders at `rate` per second, in small chunks; a chunk the broker does not acknowledge is
    sent again (only its unacknowledged records) once the broker is back."""

    def __init__(self, bootstrap: str, rate: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.rate = bootstrap, rate
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.acked = self.malformed = self.failed_sends = self.unsent = 0
        self.seq: dict[str | None, int] = {}
        self.n = 0

    def _record(self) -> tuple[bytes | None, bytes]:
        self.n += 1
        key = None if self.n % 50 == 0 else "user-0" if self.rng.random() < 0.1 else f"user-{self.rng.randrange(300)}"
        if self.rng.random() < 0.01:
            self.malformed += 1
            return (key.encode() if key else None), (b"not json {" if self.rng.random() < 0.5 else b'{"no_key": true}')
        self.seq[key] = self.seq.get(key, -1) + 1
        value = {"key": key, "seq": self.seq[key], "amount": round(self.rng.uniform(1, 500), 2), "n": self.n}
        return (key.encode() if key else None), json.dumps(value).encode()

    def run(self) -> None:
        producer = None  # one producer throughout: it reconnects by itself after a broker restart
        pending: list[tuple[bytes | None, bytes]] = []
        tick = 0.25
        while not self.stop_event.is_set():
            started = time.monotonic()
            pending += [self._record() for _ in range(max(1, round(self.rate * tick)))]
            try:
                producer = producer or KafkaProducer(
                    bootstrap_servers=self.bootstrap,
                    acks="all",
                    linger_ms=10,
                    retries=0,
                    request_timeout_ms=5000,
                    max_block_ms=5000,
                )
                futures = [(r, producer.send(TOPIC, key=r[0], value=r[1])) for r in pending]
                with contextlib.suppress(Exception):
                    producer.flush(timeout=30)
                left = []
                for r, f in futures:
                    try:
                        f.get(timeout=30)  # acknowledged, or failed (not written: no retries); sent again below
                        self.acked += 1
                    except Exception:
                        left.append(r)
                pending = left
                if left:
                    raise RuntimeError(f"{len(left)} not acknowledged")
            except Exception:
                self.failed_sends += 1
                self.stop_event.wait(1.0)
            self.stop_event.wait(max(0.0, tick - (time.monotonic() - started)))
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.close(timeout=5)
        self.unsent = len(pending)


@dataclass
class Fault:
    kind: str
    start_ms: int
    end_ms: int = 0
    detail: str = ""
    generation: int | None = None  # a rescale: the generation it created
    heal_ms: int | None = None


@dataclass
class Soak:
    home: Path
    minutes: float
    rate: float
    outage_s: float
    seed: int
    cluster: bool = False
    faults: list[Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.broker = EmbeddedBroker(self.home)
        self.spark = SparkConnectServer(self.home)
        self.postgres = PrivatePostgres(self.home / "postgres", free_port())
        self.local = LocalCluster(self.home) if self.cluster else None
        self.metadata = PrivatePostgres(self.home / "airflow-postgres", free_port()) if self.cluster else None
        self.paths = {k: f"{self.home}/{v}" for k, v in PATHS.items()}

    # --- set-up ---------------------------------------------------------------

    def job_config(self, bootstrap: str) -> Path:
        demo = (REPO / "include" / "jobs" / "demo.properties").read_text()
        lines = [line for line in demo.splitlines() if line and not line.startswith(("job.name", "task.inputs", "#"))]
        folder = self.home / "jobs"
        folder.mkdir(exist_ok=True)
        path = folder / f"{JOB}.properties"
        path.write_text(
            "\n".join(
                [
                    f"job.name={JOB}",
                    f"task.inputs=kafka.{TOPIC}",
                    *lines,
                    f"systems.kafka.consumer.bootstrap.servers={bootstrap}",
                    "airflow.microbatch.trigger=schedule",
                    "airflow.microbatch.schedule=*/1 * * * *",
                    "airflow.microbatch.max.seconds=40",
                    "job.lease.ttl.ms=60000",  # a killed batch's lease lapses within a minute for the next run
                    "job.elasticity.schedule=0-59/10 * * * * -> 6; 5-59/10 * * * * -> 3",  # the factor flips every 5 minutes
                    "job.elasticity.manual.hold.ms=120000",  # a manual rescale holds 2 minutes against the schedule
                    *(f"{k}={v}" for k, v in self.paths.items()),
                    f"job.report.path={self.home}/reports",
                ]
            )
            + "\n"
        )
        return path

    def start(self) -> None:
        self.bootstrap = self.broker.start(port=free_port()).bootstrap
        self.broker_port = int(self.bootstrap.rsplit(":", 1)[1])
        extra: dict[str, str | None] = {}
        if self.local is not None and self.metadata is not None:
            state = self.local.start(workers=WORKERS, cores=1, memory="1g")
            supervise(self.local, WORKERS, 1, memory="1g")  # what the soak kills comes back without it
            remote = state.connect or ""
            os.environ.update(state.env())  # the report reads the sinks on the shared storage
            extra |= state.env()
            self.paths = {k: v for k, v in state.job_settings(JOB).items() if k != "spark.remote"}
            db = AirflowDb(self.metadata.start().url.rsplit("/", 1)[0], "airflow", "unused").create()
            extra |= db.env()
        else:
            remote = self.spark.start(port=free_port(), master="local[2]").remote
        self.postgres.start()
        create_topic(self.bootstrap, TOPIC, PARTITIONS)
        self.config_path = self.job_config(self.bootstrap)
        self.config = load_config(self.config_path)
        self.store = CheckpointStore(self.postgres.url)
        self.airflow = AirflowStandalone(
            self.home / "airflow",
            free_port(),
            {
                **connections(self.bootstrap, remote, self.postgres.url),
                "ELASTICITY_JOBS_DIR": str(self.home / "jobs"),
                "ELASTICITY_HOME": str(self.home),
                "KAFKA_BOOTSTRAP_SERVERS": None,
                "ELASTICITY_CHECKPOINT_STORE_URL": None,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "include"), str(REPO), os.environ.get("PYTHONPATH")])),
                **extra,
            },
        )
        say(
            f"state in {self.home}; broker {self.bootstrap}, Spark Connect {remote}, store {self.postgres.url}, "
            f"Airflow {self.airflow.base} (log {self.airflow.log_file})"
        )
        self.airflow.start().wait_ready()
        self.api: AirflowApi = self.airflow.api()
        for dag in (MICROBATCH, QUALITY, "elastic_rescale", "elastic_scale_schedule"):
            self.api.wait_dag(dag)

    def stop(self) -> None:
        airflow = getattr(self, "airflow", None)
        cluster = (self.local.stop,) if self.local else ()
        metadata = (self.metadata.stop,) if self.metadata else ()
        for step in (
            ((airflow.stop,) if airflow else ()) + cluster + (self.spark.stop, self.broker.stop, self.postgres.stop) + metadata
        ):
            try:
                step()
            except Exception as e:  # keep stopping the rest
                say(f"stopping: {e}")

    # --- faults ---------------------------------------------------------------

    def _api(self) -> AirflowApi:
        """A fresh token now and then (they expire)."""
        self.api = self.airflow.api()
        return self.api

    def running_batch_pid(self) -> tuple[int, str] | None:
        api = self._api()
        for run in api.runs(MICROBATCH):
            if run["state"] != "running":
                continue
            for ti in api.task_instances(MICROBATCH, run["dag_run_id"]):
                if ti["state"] == "running":
                    title = f"airflow worker -- {ti['id']}"
                    for proc in Path("/proc").iterdir():
                        if proc.name.isdigit():
                            try:
                                if (proc / "cmdline").read_bytes().replace(b"\0", b" ").strip().decode(errors="replace") == title:
                                    return int(proc.name), f"{run['dag_run_id']} try {ti['try_number']}"
                            except OSError:
                                continue
        return None

    def kill_batch(self, deadline: float) -> None:
        """SIGKILL the running batch task's process at a random moment of its run."""
        while time.monotonic() < deadline:
            found = self.running_batch_pid()
            if found:
                time.sleep(self.rng.uniform(0, 8))
                found = self.running_batch_pid()
                if found:
                    pid, what = found
                    os.kill(pid, signal.SIGKILL)
                    t = now_ms()
                    self.faults.append(Fault("SIGKILL batch task", t, t, f"pid {pid}, {what}"))
                    say(f"SIGKILL of the batch task process {pid} ({what})")
                    return
            time.sleep(2)
        say("no batch task was running to kill in time")

    def rescale(self) -> None:
        current = self.store.generation(JOB)
        factor = self.rng.choice([f for f in range(1, 17) if not current or f != current.factor])
        start = now_ms()
        run_id = self._api().trigger("elastic_rescale", {"job": JOB, "factor": factor, "dry_run": False})
        state = self.api.wait_run("elastic_rescale", run_id, 900)["state"]
        generation = self.store.generation(JOB)
        fault = Fault(
            "manual rescale", start, now_ms(), f"to {factor}: {state}, generation {generation.number if generation else None}"
        )
        fault.generation = generation.number if generation and generation.factor == factor else None
        self.faults.append(fault)
        say(f"elastic_rescale to {factor}: {state} ({fault.detail})")

    def restart_broker(self) -> None:
        start = now_ms()
        self.broker.stop()
        say(f"broker stopped; down for {self.outage_s:.0f}s")
        time.sleep(self.outage_s)
        self.broker.start(port=self.broker_port)
        self.faults.append(Fault("broker restart", start, now_ms(), f"down {self.outage_s:.0f}s"))
        say("broker started again on the same port (its data kept)")

    def restart_store(self) -> None:
        start = now_ms()
        self.postgres.stop()
        say(f"checkpoint store (PostgreSQL) stopped; down for {self.outage_s:.0f}s")
        time.sleep(self.outage_s)
        self.postgres.start()
        self.faults.append(Fault("store restart", start, now_ms(), f"down {self.outage_s:.0f}s"))
        say("checkpoint store started again")

    def kill_daemon(self, kind: str) -> None:
        """SIGKILL a daemon of the cluster (its whole process group); the supervisor starts it again."""
        assert self.local is not None
        if kind == "worker":
            i = self.rng.randrange(WORKERS)
            daemon, what = self.local.worker(i), f"worker-{i}"
        else:
            daemon, what = {"driver": (self.local.connect.daemon, "Connect server"), "master": (self.local.master, "master")}[
                kind
            ]
        running = daemon.status()
        if running is None:
            say(f"{what} kill: not running (still healing?)")
            return
        os.killpg(running.pid, signal.SIGKILL)
        t = now_ms()
        self.faults.append(Fault(f"SIGKILL {kind}", t, t, f"{what} pid {running.pid}"))
        say(f"SIGKILL of the {what} (pid {running.pid})")

    def kill_executor(self) -> None:
        """SIGKILL one executor JVM of the cluster's workers (its worker starts a new one)."""
        executors = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    cmd, cwd = (proc / "cmdline").read_bytes(), os.readlink(proc / "cwd")
                except OSError:
                    continue
                if b"CoarseGrainedExecutorBackend" in cmd and cwd.startswith(str(self.home)):  # a worker's work dir
                    executors.append(int(proc.name))
        if not executors:
            say("executor kill: no executor runs")
            return
        pid = self.rng.choice(executors)
        os.kill(pid, signal.SIGKILL)
        t = now_ms()
        self.faults.append(Fault("SIGKILL executor", t, t, f"pid {pid}"))
        say(f"SIGKILL of executor {pid}")

    def cluster_timeline(self) -> list[tuple[float, str]]:
        """A fault every 1 to 3 minutes drawn from every kind, rescales between them, none in the last 8 %."""
        total = self.minutes * 60
        kinds = ["executor", "worker", "driver", "master", "kill", "broker", "store"]
        events, t, n = [], self.rng.uniform(60, 180), 0
        while t < total * 0.92:
            events.append((t / total, kinds[n % len(kinds)] if n < len(kinds) else self.rng.choice(kinds)))
            n += 1
            if n % 2 == 0:
                events.append(((t + 30) / total, "rescale"))
            t += self.rng.uniform(60, 180)
        return events

    def timeline(self) -> list[tuple[float, str]]:
        """When (fraction of the soak) each fault comes: rescales every few minutes, kills in between,
        the broker and the store restarts in the middle."""
        if self.cluster:
            return self.cluster_timeline()
        total = self.minutes * 60
        events = [(0.36, "broker"), (0.58, "store")]
        every = 240 if total >= 1200 else max(90, total / 4)
        t = every * 0.75
        while t < total * 0.92:
            events.append((t / total, "rescale"))
            events.append(((t + every / 2) / total, "kill"))
            t += every
        return sorted(events)

    # --- the run --------------------------------------------------------------

    def run(self) -> int:
        self.start()
        feeder = Feeder(self.bootstrap, self.rate, self.seed)
        begin = time.monotonic()
        feeder.start()
        say(
            f"feeding {self.rate:g} orders/s for {self.minutes:g} minutes; faults at "
            + ", ".join(f"{frac * self.minutes:.1f} min {kind}" for frac, kind in self.timeline())
        )
        for frac, kind in self.timeline():
            wait = begin + frac * self.minutes * 60 - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                {
                    "broker": self.restart_broker,
                    "store": self.restart_store,
                    "rescale": self.rescale,
                    "kill": lambda: self.kill_batch(time.monotonic() + 90),
                    "executor": self.kill_executor,
                    "worker": lambda: self.kill_daemon("worker"),
                    "driver": lambda: self.kill_daemon("driver"),
                    "master": lambda: self.kill_daemon("master"),
                }[kind]()
            except Exception as e:
                say(f"{kind}: could not inject: {e}")
        time.sleep(max(0.0, begin + self.minutes * 60 - time.monotonic()))
        feeder.stop_event.set()
        feeder.join()
        say(
            f"feeding stopped: {feeder.acked} orders acknowledged ({feeder.malformed} malformed, {feeder.failed_sends} failed sends "
            f"retried, {feeder.unsent} never acknowledged)"
        )
        drained = self.drain()
        quality = self.quality()
        return self.report(feeder, drained, quality, time.monotonic() - begin)

    def drain(self, timeout_s: float = 1800) -> bool:
        """Until the committed checkpoints reach the end of every partition and no batch is planned or running."""
        deadline = time.monotonic() + timeout_s
        inputs = KafkaInputs(self.config)
        while time.monotonic() < deadline:
            try:
                lag = lag_report(self.config, self.store, inputs)
                if not lag.has_work:
                    self._api().wait_idle(MICROBATCH, 900)
                    if not lag_report(self.config, self.store, inputs).has_work:
                        say("drained: no lag, no planned batch")
                        return True
                else:
                    say(f"draining: {lag.describe()}")
            except Exception as e:
                say(f"draining: {e}")
            time.sleep(20)
        return False

    def quality(self) -> dict:
        """The data-quality DAG over every committed batch, after its own runs during the soak."""
        api = self._api()
        api.wait_idle(QUALITY, 1800)
        last = max(self.store.batches_with_status(JOB, "committed"), default=0)
        run_id = api.trigger(QUALITY, {"from_batch": 1, "to_batch": last})
        state = api.wait_run(QUALITY, run_id, 3600)["state"]
        runs = sorted((self.home / "reports" / "runs").glob("*/summary.json"), key=lambda p: p.stat().st_mtime)
        checks = json.loads(runs[-1].read_text())["checks"] if runs else []
        return {
            "state": state,
            "run": run_id,
            "window": f"batches 1..{last}",
            "checks": checks,
        }

    # --- figures ---------------------------------------------------------------

    def attempt_errors(self, dag_id: str) -> dict[str, list[str]]:
        """run id -> the last error line of each failed attempt of its task, in order, from the task logs
        under the soak's Airflow home. A data-quality check that failed (a data problem) reads `QualityFailed:`;
        anything else is the task's own error (the infrastructure)."""
        out: dict[str, list[str]] = {}
        for log in sorted((self.airflow.home / "logs" / f"dag_id={dag_id}").glob("run_id=*/task_id=*/attempt=*.log")):
            last = None
            for line in log.read_text(errors="replace").splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") != "Task failed with exception":  # not a client library's logged error
                    event.pop("error_detail", None)
                for e in (event.get("error_detail") or [])[:1]:  # the exception raised (its causes follow)
                    last = f"{e.get('exc_type')}: {(str(e.get('exc_value')).strip().splitlines() or [''])[0][:200]}"
                if last is None and event.get("level") == "critical":  # killed: "Process terminated by signal"
                    last = str(event.get("event")).splitlines()[0][:200]
            if last is not None:
                run = log.parent.parent.name.removeprefix("run_id=")
                out.setdefault(run, []).append(f"attempt {log.stem.removeprefix('attempt=')}: {last}")
        return out

    def print_runs(self, label: str, dag_id: str, runs: list[dict]) -> None:
        """A DAG's runs by state, why each failed run failed, and the attempts that failed before a retry passed."""
        states = [r["state"] for r in runs]
        print(f"{label:23s} {', '.join(f'{states.count(s)} {s}' for s in sorted(set(states)))}")
        errors = self.attempt_errors(dag_id)
        for r in runs:
            if r["state"] == "failed":
                lines = errors.get(r["dag_run_id"]) or ["no error line in its task logs"]
                kind = "a check FAILED" if any("QualityFailed" in x for x in lines) else "task error"
                print(f"  failed {r['dag_run_id']} ({kind}): {lines[-1]}")
        retried = [x.split(": ", 1)[1] for r in runs if r["state"] == "success" for x in errors.get(r["dag_run_id"], [])]
        kinds: dict[str, int] = {}
        for x in retried:
            kinds[x.split(":", 1)[0]] = kinds.get(x.split(":", 1)[0], 0) + 1
        if retried:
            print(
                f"  attempts that failed before a retry passed: {len(retried)} ({', '.join(f'{k} x{n}' for k, n in sorted(kinds.items()))})"
            )

    def heal(self) -> None:
        with self.store.engine.connect() as conn:
            rows = conn.execute(
                select(st.batches.c.batch_id, st.batches.c.generation, st.batches.c.committed_ms).where(
                    st.batches.c.job_name == JOB, st.batches.c.status == "committed"
                )
            ).all()
        for f in self.faults:
            after = [
                r.committed_ms
                for r in rows
                if r.committed_ms >= f.end_ms and (f.generation is None or r.generation >= f.generation)
            ]
            f.heal_ms = min(after) - f.start_ms if after else None

    def report(self, feeder: Feeder, drained: bool, quality: dict, elapsed_s: float) -> int:
        committed = self.store.batches_with_status(JOB, "committed")
        audit = read_table(self.paths["job.audit.path"], AUDIT_SCHEMA, committed).to_pandas()
        sink = read_table(f"{self.paths['job.output.path']}/enriched", OUTPUT_SCHEMA, committed).to_pandas()
        ends = KafkaInputs(self.config).offsets([SystemStreamPartition("kafka", TOPIC, p) for p in range(PARTITIONS)], "upcoming")
        in_kafka = sum(ends.values())
        seen = audit.groupby(["partition", "offset"]).size()
        duplicated = int((seen - 1).sum())
        sink_dupes = int((sink.groupby(["source_partition", "source_offset"]).size() - 1).sum()) if len(sink) else 0
        have = set(seen.index)
        lost = sum(1 for s, end in ends.items() for o in range(end) if (s.partition, o) not in have)
        reordered = 0
        last: dict[tuple[int, bytes], int] = {}
        # stable, as the data-quality key_order check sorts: rows that tie keep the order the sink wrote them in
        keyed = audit[audit["key"].notna()].sort_values(["batch_id", "task_name", "seq"], kind="stable")
        for r in keyed.itertuples(index=False):
            k = (r.partition, r.key)
            if r.offset < last.get(k, -1):
                reordered += 1
            last[k] = max(r.offset, last.get(k, -1))
        processed = int((audit["status"] == "processed").sum())
        dead = int((audit["status"] == "dead_letter").sum())
        gens = self.store.generations(JOB)
        self.heal()

        print("\n=== soak figures ===")
        print(
            f"duration                {elapsed_s / 60:.1f} min ({self.minutes:g} min fed at {self.rate:g} orders/s, then the drain); seed {self.seed}"
        )
        print(
            f"records fed             {feeder.acked} acknowledged by the broker ({feeder.malformed} malformed); {in_kafka} in the topic"
        )
        print(
            f"records processed       {processed + dead} ({processed} to the sink, {dead} dead letters) in {len(committed)} committed batches"
        )
        print(f"lost                    {lost}{'' if drained else ' (NOT DRAINED within the timeout)'}")
        print(f"duplicated              {duplicated} in the audit, {sink_dupes} in the exactly-once sink")
        print(f"reordered               {reordered} (a key's record processed after a later one of its partition)")
        origins = {}
        for g in gens[1:]:
            origins[g.origin] = origins.get(g.origin, 0) + 1
        print(
            f"generations             {len(gens)}: factors {' -> '.join(str(g.factor) for g in gens)}; rescales by origin {origins}"
        )
        print("faults injected         (heal = from the fault to the first batch committed after it ended)")
        for f in self.faults:
            healed = f"healed in {f.heal_ms / 1000:.0f}s" if f.heal_ms is not None else "NOT healed"
            print(f"  {time.strftime('%H:%M:%S', time.localtime(f.start_ms / 1000))}  {f.kind:20s} {f.detail:60s} {healed}")
        print("heal time per kind      (count, median, worst)")
        for kind in sorted({f.kind for f in self.faults}):
            heals = sorted(f.heal_ms / 1000 for f in self.faults if f.kind == kind and f.heal_ms is not None)
            count = sum(1 for f in self.faults if f.kind == kind)
            figures = f"median {heals[len(heals) // 2]:.0f}s, worst {heals[-1]:.0f}s" if heals else "none healed"
            print(f"  {kind:22s} {count} x, {figures}{'' if len(heals) == count else f', {count - len(heals)} NOT healed'}")
        if self.local is not None:
            restarts = SupervisorStatus.read(status_file(self.local))
            print(f"supervisor              {restarts.line() if restarts else 'no status'}")
        for g in gens[1:]:
            if g.origin == "schedule":
                print(
                    f"  {time.strftime('%H:%M:%S', time.localtime(g.created_ms / 1000))}  scheduled rescale    to {g.factor} "
                    f"(generation {g.number})"
                )
        self.print_runs("micro-batch DAG runs", MICROBATCH, self._api().runs(MICROBATCH))
        during = [r for r in self.api.runs(QUALITY) if r["dag_run_id"] != quality["run"]]
        self.print_runs("data-quality DAG runs", QUALITY, during)
        print(f"data-quality final run  over {quality['window']}: {quality['state']}")
        for c in quality["checks"]:
            print(f"  {'PASS' if c['success'] else 'FAIL'} {c['name']:13s} {c['rows']:>7} rows, {c['unexpected']} unexpected")
        ok = drained and lost == 0 and duplicated == 0 and sink_dupes == 0 and reordered == 0 and quality["state"] == "success"
        ok = ok and not any(r["state"] == "failed" for r in during)  # every data-quality run passes
        print(f"verdict                 {'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30, help="how long to feed and inject faults (the drain follows)")
    p.add_argument("--rate", type=float, default=10, help="orders per second")
    p.add_argument("--outage", type=float, default=30, help="seconds the broker and the store stay down")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--keep", action="store_true", help="keep the state folder")
    p.add_argument("--cluster", action="store_true", help="on the local cluster, with its daemons' faults (see above)")
    args = p.parse_args()
    if args.minutes <= 0 or args.rate <= 0:
        p.error("--minutes and --rate must be > 0")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    home = Path(tempfile.mkdtemp(prefix="elasticity-soak-"))
    os.chmod(home, 0o755)  # the private PostgreSQL runs as its own user below it
    soak = Soak(home, args.minutes, args.rate, args.outage, seed, args.cluster)
    try:
        return soak.run()
    finally:
        soak.stop()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
