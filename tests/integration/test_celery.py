"""Airflow as production runs it, on this machine: the CeleryExecutor topology of `elasticity airflow --executor
celery` (local/celery_topology.py) with two Celery workers, each on a host of its own (a network namespace with
its own address, AIRFLOW_HOME, ELASTICITY_HOME and working folder), Redis as Celery's broker (one of the
test's own, so that it can be restarted), Airflow's metadata and the checkpoints on PostgreSQL, the job's sinks,
audit, blobs and reports on the S3-protocol server, its batches on a Spark Connect server. Every run is
triggered through the REST API and driven by Airflow's own scheduler.

One set-up for the module; four faults, each followed by the same checks: every order once and in per-key
order, each committed batch with its outputs and audit rows, the data-quality run passing on whichever worker
runs it, maintenance on the other worker compacting and expiring up to the validated batch, and the job page
(from the API server) listing every run, attempt and failure.

(a) a worker SIGKILLed while it runs a micro-batch: the scheduler fails the task once its heartbeats stop, and
    the retry runs the batch again on the other worker;
(b) a worker SIGSTOPped past the heartbeat timeout while it runs a micro-batch, then resumed: its attempt's
    commit is refused by the per-attempt fencing (SupersededError), recorded as a failed attempt;
(c) Redis restarted (empty: it keeps nothing on disk; a task published meanwhile is lost and queued again after
    the queued timeout);
(d) the API server restarted.

A micro-batch is caught "while it runs" by the fault point `commit.before_fence` holding one armed attempt
(`elasticity.faults.hold`): its outputs and audit rows are written, its commit not yet made.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import shutil
import signal
import socket
import threading
import time
import uuid
from types import SimpleNamespace

import pytest
import requests

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.store.attempt_token import AttemptToken
from elasticity.config import validate
from elasticity.kafka.producer import send
from elasticity.local.celery_topology import CeleryTopology
from elasticity.local.connect_server import SparkConnectServer
from elasticity.local.daemon import free_port
from elasticity.local.redis_broker import RedisBroker, answers
from elasticity.local.s3server import ACCESS_KEY, SECRET_KEY
from elasticity.local.standalone import LOCAL_POSTGRES, AirflowDb, connections
from elasticity.local.tcp_relay import relay
from tests.integration.test_engine import assert_exactly_once_in_order
from tests.integration.test_scheduler_postgres import environment
from tests.support.helpers import fresh_topic, job_props, write_properties

# The scheduler's task heartbeat timeout on the test's own copy: a third of the product's (HEARTBEAT_TIMEOUT_S, 90 s),
# since what is proved is the retry on the other worker and the fencing, not the wait;
# ELASTICITY_TEST_CELERY_HEARTBEAT_S=90 measures the product's figure.
HEARTBEAT_S = int(os.environ.get("ELASTICITY_TEST_CELERY_HEARTBEAT_S", "30"))
QUEUED_S = 30  # the same for a task a restarted Redis lost (the product's QUEUED_TIMEOUT_S: 120 s)
HOLD = "commit.before_fence"
FIGURES: dict[str, float] = {}

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("redis-server"),
    reason="the Celery topology's worker hosts need root and `ip`, its broker redis-server (`make test` installs them)",
)

# run by `make celery` (pytest -m celery), not by `make test` yet: see docs/reference/testing.md
pytestmark = pytest.mark.celery


# --- the relay and the broker probe, without the topology ----------------------------------------------------


def _echo_server() -> tuple[socket.socket, int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def test_the_relay_joins_a_port_byte_for_byte_and_a_refused_target_closes_the_client():
    server, port = _echo_server()
    listen = "127.0.0.2"  # another loopback address, the same port: as a worker host's relay does
    dead = free_port()

    async def scenario() -> None:
        started = asyncio.Event()
        serving = asyncio.ensure_future(relay(listen, "127.0.0.1", [port, dead], started))
        await asyncio.wait_for(started.wait(), 10)
        try:
            reader, writer = await asyncio.open_connection(listen, port)
            payload = b"orders " * 20_000  # more than one read
            writer.write(payload)
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), 10) == payload.upper()
            writer.close()
            reader, writer = await asyncio.open_connection(listen, dead)
            assert await asyncio.wait_for(reader.read(), 15) == b""  # nothing listens there: closed
            writer.close()
        finally:
            serving.cancel()

    try:
        asyncio.run(scenario())
    finally:
        server.close()


def test_no_redis_answers_on_a_free_port():
    assert not answers(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.5)


# --- the topology ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(kafka_bootstrap, s3_server, tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("redis-server"):
        pytest.skip("the Celery topology's worker hosts need root and `ip`, its broker redis-server")
    started = time.monotonic()
    tmp = tmp_path_factory.mktemp("celery")
    suffix = uuid.uuid4().hex[:8]
    db = AirflowDb(LOCAL_POSTGRES, f"elasticity_airflow_c{suffix}", f"elasticity_c{suffix}")
    holds = tmp / "holds"
    holds.mkdir()
    shared = {
        "AWS_ENDPOINT_URL": f"http://{s3_server.endpoint}",
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": "us-east-1",
        "DEMO_LOOKUP_MS": "0",
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,  # this process's checks; Airflow's get the connection
    }
    job = f"celery{suffix}"
    topic = fresh_topic(kafka_bootstrap, "celery", 2)
    props = job_props(
        job,
        topic,
        tmp,
        factor=2,
        **{
            "app.class": "elasticity.apps.enrichment:build",
            "job.container.count": "2",
            "job.output.path": f"s3://state/{job}/output",
            "job.audit.path": f"s3://state/{job}/audit",
            "job.dead.letter.path": f"s3://state/{job}/dead-letter",
            "job.report.path": f"s3://state/{job}/reports",
            "blob.store.uri": f"s3://state/{job}/blobs",
            "airflow.microbatch.trigger": "schedule",
            "airflow.microbatch.schedule": "0 0 1 1 *",  # the test's runs are triggered
            "airflow.maintenance.schedule": "0 0 1 1 *",
            "job.lease.ttl.ms": "15000",  # a lost attempt's lease expires well before its task is failed
            "job.batches.retention.ms": "0",  # maintenance expires every plan up to the validated batch
        },
    )
    props.pop("task.checkpoint.store.url")  # the elasticity_store connection: PostgreSQL
    (tmp / "jobs").mkdir()
    write_properties(tmp / "jobs" / f"{job}.properties", props)
    redis = RedisBroker(tmp / "redis")
    server = SparkConnectServer(tmp / "spark")
    topology = None
    with environment(shared):
        try:
            remote = f"sc://127.0.0.1:{free_port()}"  # its port known before the worker hosts' relays start
            failed: list[BaseException] = []

            def start_engine() -> None:
                try:
                    server.start(port=int(remote.rsplit(":", 1)[1]), master="local[2]")
                except BaseException as e:  # noqa: BLE001 - raised below
                    failed.append(e)

            starting = threading.Thread(target=start_engine, daemon=True)
            starting.start()  # beside Airflow's start
            topology = CeleryTopology(
                tmp / "topology",
                db,
                redis.start(),
                port=free_port(),
                workers=2,
                heartbeat_timeout_s=HEARTBEAT_S,
                queued_timeout_s=QUEUED_S,
                env_extra={
                    **connections(kafka_bootstrap, remote, str(db.store_url)),
                    "ELASTICITY_JOBS_DIR": str(tmp / "jobs"),
                    "ELASTICITY_FAULT": f"{HOLD}:hold:{holds}",
                    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
                    "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "10",
                    "KAFKA_BOOTSTRAP_SERVERS": None,
                    "ELASTICITY_CHECKPOINT_STORE_URL": None,  # the connections must be enough
                },
            )
            topology.start()
            starting.join()
            assert not failed, f"the Connect server did not start: {failed}"
            topology.wait_ready()
            api = topology.api()
            store = CheckpointStore(str(db.store_url))
            FIGURES["topology up (s)"] = time.monotonic() - started
            print(f"\ntopology up in {FIGURES['topology up (s)']:.1f} s: {topology.base}, hosts {topology.tag}")
            yield SimpleNamespace(
                job=job,
                topic=topic,
                bootstrap=kafka_bootstrap,
                config=validate(props | {"task.checkpoint.store.url": str(db.store_url)}),
                topology=topology,
                api=api,
                store=store,
                remembered=Remembered(store),
                redis=redis,
                holds=holds,
                runs=[],  # the micro-batch runs that committed, in order
                failures=[],  # (run, attempt) expected on the job page
                fed=0,
                seed=60,
            )
        finally:
            leftovers = []
            if topology is not None:
                topology.stop()
                leftovers = topology.hosts.leftovers()
            redis.stop()
            server.stop()
            db.drop()
            print("\nfigures: " + ", ".join(f"{k} {v:.1f}" for k, v in FIGURES.items()))
            assert leftovers == [], f"namespaces or links left behind: {leftovers}"


# --- driving and checking ----------------------------------------------------------------------------------------


def _wait(predicate, timeout_s: float, what: str, world, every: float = 1.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(every)
    pytest.fail(f"{what} within {timeout_s:.0f}s\n{world.topology.tails(25)}")


def _dag(world, kind: str) -> str:
    return f"elastic_{kind}__{world.job}"


def _feed(world, n: int = 120) -> None:
    world.seed += 1
    world.fed += send(world.bootstrap, world.topic, demo_records(n, keys=20, seed=world.seed))


def _ti(world, kind: str, run_id: str) -> dict:
    (ti,) = world.api.task_instances(_dag(world, kind), run_id)
    return ti


def _worker_of(world, ti: dict) -> int:
    """The worker whose host's address Airflow recorded as the task instance's host name."""
    addresses = {world.topology.host(i).address: i for i in (1, 2)}
    assert ti["hostname"] in addresses, f"task ran on {ti['hostname']!r}, not on a worker host: {addresses}"
    return addresses[ti["hostname"]]


def _arm(world) -> None:
    (world.holds / f"{HOLD}.armed").touch()


def _held(world) -> dict:
    path = world.holds / f"{HOLD}.held"

    def read():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    return _wait(read, 180, "no attempt reached the armed commit", world, every=0.2)


def _release(world) -> None:
    (world.holds / f"{HOLD}.held").unlink(missing_ok=True)


def _run_to_success(world, run_id: str, timeout_s: float = 300) -> dict:
    run = world.api.wait_run(_dag(world, "microbatch"), run_id, timeout_s)
    assert run["state"] == "success", f"{run}\n{world.topology.tails(40)}"
    world.runs.append(run_id)
    return run


def _committed_by(world, run_id: str) -> list[dict]:
    return [m for m in world.store.metrics(world.job, limit=500) if AttemptToken.parse(m["owner"]).run == run_id]


def _quality_after(world, run_id: str) -> tuple[str, int]:
    """The data-quality run the micro-batch run's Asset event started: it passes; its run id and worker."""
    dag = _dag(world, "data_quality")
    began = world.api.run(_dag(world, "microbatch"), run_id)["start_date"]

    def after():
        runs = [r for r in world.api.runs(dag) if r["run_type"] == "asset_triggered" and (r["queued_at"] or "") >= began]
        return [r for r in runs if r["state"] in ("success", "failed")]

    run = _wait(after, 240, f"no data-quality run after {run_id}", world, every=2)[-1]
    assert run["state"] == "success", f"data quality failed: {world.api.log(dag, run['dag_run_id'], 'validate', 1)[-3000:]}"
    return run["dag_run_id"], _worker_of(world, _ti(world, "data_quality", run["dag_run_id"]))


def _maintenance_on(world, worker: int) -> dict:
    """A maintenance run on `worker`, the other one stopped meanwhile (as an operator drains a host); what it
    removed. Not Celery's cancel_consumer and add_consumer: Celery 5.6 leaves the queue out of the worker's
    selection after that round trip, and the worker's next connection (after a Redis restart) consumes nothing."""
    other = world.topology.worker_name(3 - worker)
    world.topology.stop_component(other)
    try:
        dag = _dag(world, "maintenance")
        world.api.wait_idle(dag, 120)
        run_id = world.api.trigger(dag)
        run = world.api.wait_run(dag, run_id, 240)
        assert run["state"] == "success", world.api.log(dag, run_id, "apply_retention", 1)[-3000:]
    finally:
        world.topology.start_worker(3 - worker)
        _wait(lambda: world.topology.worker_ready(3 - worker), 120, f"{other} did not come back", world)
    assert _worker_of(world, _ti(world, "maintenance", run_id)) == worker
    r = requests.get(
        f"{world.topology.base}/api/v2/dags/{dag}/dagRuns/{run_id}/taskInstances/apply_retention/xcomEntries/return_value",
        headers={"Authorization": f"Bearer {world.api.token}"},
        timeout=30,
    )
    r.raise_for_status()
    value = r.json()["value"]
    if isinstance(value, str):  # serialized as JSON, or as Python's repr
        try:
            return json.loads(value)
        except ValueError:
            return ast.literal_eval(value)
    return value


def _page(world) -> dict:
    r = requests.get(
        f"{world.topology.base}/elasticity/api/jobs/{world.job}",
        headers={"Authorization": f"Bearer {world.api.token}"},
        timeout=60,
    )
    r.raise_for_status()
    return r.json()


class Remembered:
    """The job's store, answering which batches committed with every one it has seen committed: maintenance
    expires the plans of validated batches, whose rows stay in the sinks."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store, self.committed = store, set()

    def batches_with_status(self, job: str, status: str) -> list[int]:
        assert status == "committed"
        self.committed |= set(self.store.batches_with_status(job, status))
        return sorted(self.committed)

    def __getattr__(self, name: str):
        return getattr(self.store, name)


def _check(world, label: str, run_id: str, ran_on: int | None = None) -> None:
    """After a fault: every order once and in per-key order, each committed batch with its outputs and audit
    rows; data quality passing wherever it runs, then maintenance on the other worker; the job page."""
    checked = time.monotonic()
    config, store = world.config, world.remembered
    audit_rows, _ = assert_exactly_once_in_order(store, config, world.bootstrap)
    assert len({(r["partition"], r["offset"]) for r in audit_rows}) == world.fed
    committed = store.batches_with_status(world.job, "committed")
    lacking = [
        b
        for b in committed
        if not len(read_table(config.get("job.audit.path"), AUDIT_SCHEMA, [b]))
        or not len(read_table(f"{config.get('job.output.path')}/enriched", OUTPUT_SCHEMA, [b]))
    ]
    assert lacking == [], f"committed batches without outputs or audit rows: {lacking}"
    dq_run, dq_worker = _quality_after(world, run_id)
    validated = store.validated_batch(world.job)
    assert validated == max(committed)
    plans = [p.batch_id for p in store.plans(world.job)]
    done = _maintenance_on(world, 3 - dq_worker)
    removed = done["removed"]
    assert done["validated_batch"] == validated, done
    # compacted once two batches or more are validated (one batch's rows may be one file a sink: nothing to merge)
    assert removed["sink_files"] > 0 or len(committed) < 2, done
    assert removed["batch_plans"] == len(plans) - 1, (plans, done)  # every plan but the latest, all validated
    assert [p.batch_id for p in store.plans(world.job)] == [max(committed)]  # expired up to the validated batch
    assert_exactly_once_in_order(store, config, world.bootstrap)  # compacted: still every order once, in order
    page = _page(world)
    owners = [AttemptToken.parse(b["owner"]) for b in page["batches"]]
    assert {o.run for o in owners} >= set(world.runs[-3:]), "a committing run missing from the job page"
    assert {(f["run_id"], f["attempt"]) for f in page["failures"]} >= set(world.failures)
    assert any(q["run"] == dq_run or dq_run in json.dumps(q) for q in page["quality_runs"])
    report = requests.get(
        f"{world.topology.base}/elasticity/reports/{world.job}/summary.html",
        headers={"Authorization": f"Bearer {world.api.token}"},
        timeout=60,
    )
    assert report.status_code == 200 and "<html" in report.text.lower(), report.text[:500]  # from the object store
    FIGURES[f"{label}: checks (s)"] = time.monotonic() - checked
    print(
        f"{label}: batches {committed}; data quality {dq_run} on worker {dq_worker}; maintenance on worker "
        f"{3 - dq_worker} removed {removed}; micro-batch ran on worker {ran_on}"
    )


def _microbatch_held(world) -> tuple[str, dict, int]:
    """Records fed, the commit armed, a run triggered: its attempt, held mid-batch, and its worker."""
    _feed(world)
    _arm(world)
    run_id = world.api.trigger(_dag(world, "microbatch"))
    held = _held(world)
    addresses = {world.topology.host(i).address: i for i in (1, 2)}
    worker = addresses[held["host"]]
    lease = world.store.lease(world.job)
    assert lease is not None and (AttemptToken.parse(lease.owner).run, AttemptToken.parse(lease.owner).try_number) == (run_id, 1)
    return run_id, held, worker


def _retried_on(world, run_id: str, worker: int, since: float, label: str) -> None:
    """The task's next try runs on the other worker; the time from the fault to it."""

    def retried():
        ti = _ti(world, "microbatch", run_id)
        return ti if ti["try_number"] >= 2 and ti["state"] in ("running", "success") and ti["hostname"] else None

    ti = _wait(retried, HEARTBEAT_S + 180, f"{label}: the micro-batch was not retried", world)
    FIGURES[f"{label}: running again after (s)"] = time.monotonic() - since
    assert _worker_of(world, ti) == 3 - worker


# --- the story -------------------------------------------------------------------------------------------------


@needs_root
def test_the_workers_run_the_microbatches_and_data_quality_each_on_a_host_of_its_own(world):
    api, topology = world.api, world.topology
    dag = _dag(world, "microbatch")
    assert api.wait_dag(dag)["is_paused"] is False
    api.wait_idle(dag, 180)  # a scheduled run at start, if Airflow made one: nothing to read yet
    _feed(world)
    run_id = world.api.trigger(dag)
    _run_to_success(world, run_id)
    worker = _worker_of(world, _ti(world, "microbatch", run_id))
    assert sum(m["processed"] for m in _committed_by(world, run_id)) == world.fed
    # each worker a host of its own: its own address, homes and folder
    envs = [topology.worker_env(i) for i in (1, 2)]
    assert len({e["ELASTICITY_HOME"] for e in envs} | {e["AIRFLOW_HOME"] for e in envs}) == 4
    log = api.log(dag, run_id, "run_batches", 1)
    assert "micro-batches of" in log  # the API server fetched the task's log from the worker's log server
    _check(world, "first run", run_id, worker)


@needs_root
def test_a_worker_killed_mid_batch_has_its_batch_run_again_on_the_other_worker(world):
    run_id, _, worker = _microbatch_held(world)
    killed = time.monotonic()
    world.topology.signal(world.topology.worker_name(worker), signal.SIGKILL)
    _release(world)
    _retried_on(world, run_id, worker, killed, "(a) SIGKILL")
    _run_to_success(world, run_id)
    FIGURES["(a) SIGKILL: run succeeded after (s)"] = time.monotonic() - killed
    world.topology.start_worker(worker)  # the host is back, an empty worker on it
    _wait(lambda: world.topology.worker_ready(worker), 120, "the killed worker did not come back", world)
    assert [AttemptToken.parse(m["owner"]).try_number for m in _committed_by(world, run_id)] == [2]
    _check(world, "(a) SIGKILL", run_id, 3 - worker)


@needs_root
def test_a_worker_paused_past_the_heartbeat_timeout_is_refused_by_the_fencing_when_it_resumes(world):
    run_id, held, worker = _microbatch_held(world)
    name = world.topology.worker_name(worker)
    paused = time.monotonic()
    pids = world.topology.signal(name, signal.SIGSTOP)
    assert held["pid"] in pids
    _release(world)  # the attempt goes on to its commit as soon as it runs again
    try:
        _retried_on(world, run_id, worker, paused, "(b) SIGSTOP")
        _run_to_success(world, run_id)
        FIGURES["(b) SIGSTOP: run succeeded after (s)"] = time.monotonic() - paused
        # the paused attempt runs again (its supervisor, still paused, cannot stop it first): its commit is refused
        os.kill(held["pid"], signal.SIGCONT)

        def refused():
            return [f for f in world.store.failures(world.job) if f.run_id == run_id and f.attempt == 1]

        (failure,) = _wait(refused, 60, "the resumed attempt's failure was not recorded", world, every=0.5)
        assert "superseded" in failure.error, failure.error
    finally:
        world.topology.signal(name, signal.SIGCONT)
    world.failures.append((run_id, 1))
    assert [AttemptToken.parse(m["owner"]).try_number for m in _committed_by(world, run_id)] == [2]
    print(f"(b) the resumed attempt: {failure.error}")
    _check(world, "(b) SIGSTOP", run_id, 3 - worker)


@needs_root
def test_redis_restarted_empty_and_the_next_runs_go_through(world):
    """Redis restarts with nothing of what it held: both workers reconnect and take the next tasks (the run's
    micro-batch, its data quality and, on the other worker, maintenance)."""
    dag = _dag(world, "microbatch")
    restarted = time.monotonic()
    world.redis.restart()
    _feed(world)
    run_id = world.api.trigger(dag)
    run = world.api.wait_run(dag, run_id, QUEUED_S + 120)
    assert run["state"] == "success", run
    world.runs.append(run_id)
    FIGURES["(c) Redis restart: next run succeeded after (s)"] = time.monotonic() - restarted
    _check(world, "(c) Redis restart", run_id, _worker_of(world, _ti(world, "microbatch", run_id)))


@needs_root
def test_the_api_server_restarted_and_the_job_page_lists_everything_again(world):
    restarted = time.monotonic()
    world.topology.restart_api_server()
    FIGURES["(d) API server restart: answering after (s)"] = time.monotonic() - restarted
    _feed(world)
    run_id = world.api.trigger(_dag(world, "microbatch"))  # the same token: the JWT secret is the topology's
    _run_to_success(world, run_id)
    FIGURES["(d) API server restart: next run succeeded after (s)"] = time.monotonic() - restarted
    _check(world, "(d) API server restart", run_id, _worker_of(world, _ti(world, "microbatch", run_id)))
    page = _page(world)
    assert {AttemptToken.parse(b["owner"]).run for b in page["batches"]} == set(world.runs)  # every run, from the start
