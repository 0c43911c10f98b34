"""A Spark Connect server warm before it serves jobs.

A new server's first batch paid for what later batches find ready: the JVM loading and compiling the Connect
server's plan and execute path and the Arrow exchange with Python, and, in each new Connect session, a Python
daemon and workers that import pyarrow, the library, the Kafka client and RocksDB (the Python workers of a
session are its own: Spark keys them by the session's artifacts). Started after the server's port opens, in a
process of its own (the command that started the server returns at once), the warm-up

  1. runs a synthetic job through the engine's real stages (plan, read, route, process, sink, commit) on a
     throwaway session: the stateful demo app over a few hundred records on a topic of the embedded broker,
     in a folder of its own, removed after; with no broker, the same session's slots import the stages instead;
  2. readies each job's own session (the fixed session id the job's batches use): its placed slots (the cached
     DataFrame the engine maps over) and its Python workers, with the stages imported.

Its state is `<server home>/warm-up.json` (warming, warm, failed), which `elasticity spark status` prints, and
its log `warm-up.log` beside the server's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elasticity.config.services import BROKER, alive, running_service

WARM_RECORDS = 3000  # ten of the demo job's batches at 300 records: each stage's classes loaded, its hot paths compiled
WARM_BATCH = 300
READY_ROUNDS = 3  # a session's first plans cost its server more than later ones
DONE = "warm-up done"  # the log line a warm server ends its warm-up with


@dataclass(kw_only=True)
class WarmUpState:
    """Where a server's warm-up stands: `warming` (pid), `warm` (seconds), `failed` (error)."""

    state: str
    pid: int
    started: float
    seconds: float | None = None
    jobs: list[str] = field(default_factory=list)
    engine: str = ""  # how the engine's stages were run: "embedded broker at ..." or "no broker: imports only"
    error: str = ""

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> WarmUpState | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def line(self) -> str:
        """What `elasticity spark status` says of it."""
        if self.state == "warming":
            return (
                f"warming (pid {self.pid}, {time.time() - self.started:.0f} s so far): a job may start; its first batch is slower"
            )
        if self.state == "warm":
            sessions = f"; sessions of {', '.join(self.jobs)} ready" if self.jobs else ""
            return f"warm (warm-up took {self.seconds:.0f} s; {self.engine}{sessions})"
        return f"warm-up failed: {self.error} (the server serves jobs; their first batch is slower)"


def state_path(server_home: Path) -> Path:
    return server_home / "warm-up.json"


def status(server_home: Path) -> WarmUpState | None:
    """The warm-up's state; one left `warming` by a process that died is `failed`."""
    s = WarmUpState.read(state_path(server_home))
    if s is not None and s.state == "warming" and not alive(s.pid):
        s.state, s.error = "failed", "the warm-up process died"
    return s


def start_warm_up(
    remote: str,
    server_home: Path,
    jobs: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    bootstrap: str | None = None,
) -> subprocess.Popen[bytes]:
    """The warm-up of the server at `remote`, detached (it outlives the command that started the server); its
    state and log under `server_home`. `jobs`: job config files whose sessions are readied; `env`: the server's;
    `bootstrap`: the broker of the synthetic job (default: the embedded broker, when it runs)."""
    log = server_home / "warm-up.log"
    command = [sys.executable, "-m", "elasticity.local.warmup", remote, "--home", str(server_home)]
    command += [arg for j in jobs for arg in ("--job", str(j))]
    command += ["--bootstrap", bootstrap] if bootstrap else []
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=server_home, env=env, start_new_session=True
        )
    WarmUpState(state="warming", pid=proc.pid, started=time.time()).write(state_path(server_home))
    return proc


def project_jobs(folder: str = "") -> list[Path]:
    """The project's job configs (ELASTICITY_JOBS_DIR, else include/jobs; its `folder`, e.g. the local cluster's
    `cluster`): none when there is no project here."""
    from elasticity.airflow.project import ProjectError, jobs_dir

    try:
        return sorted((jobs_dir() / folder).glob("*.properties"))
    except ProjectError:
        return []


# --- the warm-up ------------------------------------------------------------------------------------------


def synthetic_job(bootstrap: str, folder: Path) -> Any:
    """The stateful demo job (RocksDB store backed up to the blob store) over a topic of its own, in `folder`."""
    from elasticity.apps.demo_feed import demo_records
    from elasticity.config import validate
    from elasticity.kafka.admin import create_topic
    from elasticity.kafka.producer import send

    name = f"elasticity-warm-up-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, 4)
    send(bootstrap, name, demo_records(WARM_RECORDS, keys=300, seed=7, null_key_every=0, hot_key_share=0))
    return validate(
        {
            "job.name": name,
            "task.inputs": f"kafka.{name}",
            "systems.kafka.consumer.bootstrap.servers": bootstrap,
            "app.class": "elasticity.apps.enrichment:build_stateful",
            "job.elasticity.factor": "2",
            "job.container.count": "2",
            "systems.kafka.default.stream.samza.offset.default": "oldest",
            "batch.max.records": str(WARM_BATCH),
            "task.max.concurrency": "64",  # the demo's simulated lookups overlap: no wait is warm-up
            "stores.totals.backup.factories": "blobstore",
            "blob.store.uri": (folder / "blobs").as_uri(),
            "job.state.dir": str(folder / "state"),
            "task.checkpoint.store.url": f"sqlite:///{folder}/checkpoints.db",
            "job.output.path": str(folder / "out"),
            "job.audit.path": str(folder / "audit"),
            "job.dead.letter.path": str(folder / "dlq"),
            "task.checkpoint.read.versions": "2,1",
        }
    )


def warm_engine(remote: str, bootstrap: str | None) -> str:
    """Step 1 on a throwaway session, released after; what it ran."""
    from elasticity.spark.placement import ready_slots
    from elasticity.spark.session import session
    from elasticity.spark.target import SparkTarget

    folder = Path(tempfile.mkdtemp(prefix="elasticity-warm-up-"))
    try:
        if bootstrap is None:
            from elasticity.config import validate

            config = validate({"job.name": f"elasticity-warm-up-{uuid.uuid4().hex[:8]}", "task.inputs": "kafka.none"})
            spark = session(config, target=SparkTarget("connect", remote, "warm-up"))
            ready_slots(spark, 2, READY_ROUNDS)
            spark.stop()
            return "no broker: the stages imported"
        from elasticity.spark.engine import MicroBatchEngine

        config = synthetic_job(bootstrap, folder)
        spark = session(config, target=SparkTarget("connect", remote, "warm-up"))
        try:
            summaries = MicroBatchEngine(config, spark).run(until_caught_up=True)
        finally:
            spark.stop()
            _delete_topic(config)
        done = sum(s.processed for s in summaries)
        if done != WARM_RECORDS:
            raise RuntimeError(f"the synthetic job processed {done} of {WARM_RECORDS} records")
        batches = sum(1 for s in summaries if s.batch_id is not None)
        return f"the stateful demo job, {batches} batches on {bootstrap}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _delete_topic(config: Any) -> None:
    from elasticity.kafka.admin import admin_client, client_settings

    with contextlib.suppress(Exception), admin_client(client_settings(config, "kafka", "admin")) as admin:
        admin.delete_topics([config.job_name])


def warm_job(remote: str, job_file: str) -> str:
    """Step 2 for one job config: its session's slots and workers; the job's name."""
    from elasticity.config import load_config
    from elasticity.spark.placement import ready_slots
    from elasticity.spark.session import session
    from elasticity.spark.target import SparkTarget

    config = load_config(job_file)
    spark = session(config, target=SparkTarget("connect", remote, "warm-up"))
    ready_slots(spark, config.container_count * config.container_process_count, READY_ROUNDS)
    return config.job_name  # the session stays: it is the job's


def warm_up(remote: str, server_home: Path, jobs: Sequence[str] = (), bootstrap: str | None = None) -> WarmUpState:
    path = state_path(server_home)
    state = WarmUpState(state="warming", pid=os.getpid(), started=time.time())
    state.write(path)
    if bootstrap is None and (broker := running_service(BROKER)) is not None:
        bootstrap = broker.address
    try:
        state.engine = warm_engine(remote, bootstrap)
        print(f"{time.strftime('%H:%M:%S')} engine warm: {state.engine}", flush=True)
        for j in jobs:
            try:
                state.jobs.append(warm_job(remote, j))
            except Exception as e:  # noqa: BLE001 - a job config that does not load is the job's own error, later
                print(f"{time.strftime('%H:%M:%S')} {j}: its session not readied: {e}", flush=True)
    except Exception as e:  # noqa: BLE001 - the server serves jobs all the same, only colder
        state.state, state.error = "failed", (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        state.seconds = round(time.time() - state.started, 1)
        state.write(path)
        print(f"{time.strftime('%H:%M:%S')} warm-up failed: {state.error}", flush=True)
        return state
    state.state, state.seconds = "warm", round(time.time() - state.started, 1)
    state.write(path)
    print(f"{time.strftime('%H:%M:%S')} {DONE} in {state.seconds:.1f} s; sessions readied: {state.jobs}", flush=True)
    return state


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("remote", help="sc://host:port of the server")
    p.add_argument("--home", type=Path, required=True, help="the server's folder (warm-up.json is written there)")
    p.add_argument("--job", action="append", default=[], help="a job config whose session is readied")
    p.add_argument("--bootstrap", default=None, help="a broker for the synthetic job (default: the embedded one)")
    args = p.parse_args()
    return 0 if warm_up(args.remote, args.home, args.job, args.bootstrap).state == "warm" else 1


if __name__ == "__main__":
    sys.exit(main())
