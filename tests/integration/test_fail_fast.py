"""Bad addresses fail fast and clearly: a broker or a checkpoint store that is a closed
port, or a real listener that accepts TCP and never answers, ends every command that
talks to it with one `error:` line naming the address (no traceback, no Spark started);
and `run-batch --until-caught-up` prints each batch's summary as it commits, so a run
killed half-way has told what it committed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.lag import lag_report
from elasticity.checkpoint.store import CheckpointStore, StoreError
from elasticity.config import validate
from elasticity.kafka.admin import BrokerUnreachable, create_topic
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.local.daemon import free_port
from tests.conftest import REPO
from tests.support.helpers import job_props, write_properties

HANG_GUARD_S = 120  # kafka-python alone takes 30-60 s on a silent listener; PostgreSQL without a timeout hangs forever


@pytest.fixture(scope="module")
def silent() -> Iterator[str]:
    """A real TCP listener on loopback that accepts every connection and never sends a byte."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for c in held:
            c.close()
        server.close()


@pytest.fixture(scope="module")
def closed() -> str:
    return f"127.0.0.1:{free_port()}"  # nothing listens there


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _start_cli(config, *args: str) -> subprocess.Popen:
    return _start([sys.executable, "-m", "elasticity", *args, "--config", str(config)], _cli_env())


def _cli(config, *args: str) -> subprocess.CompletedProcess:
    return _finish(_start_cli(config, *args))


def _assert_one_error_line(done: subprocess.CompletedProcess, *names: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr  # nothing else ran (no Spark log either)
    for name in names:
        assert name in lines[0]


KAFKA_COMMANDS = {
    "run-batch": ["run-batch"],
    "run-batch --until-caught-up": ["run-batch", "--until-caught-up"],
    "rescale": ["rescale", "--factor", "4"],
    "rescale --dry-run": ["rescale", "--factor", "4", "--dry-run"],
    "job-model": ["job-model"],
    "feed": ["feed", "--records", "5"],
    "checkpoint-tool import": ["checkpoint-tool", "import", "--from-kafka", "kafka.samza-checkpoints"],
}


STORE_COMMANDS = {
    "run-batch": ["run-batch"],
    "rescale": ["rescale", "--factor", "3"],
    "checkpoint-tool read": ["checkpoint-tool", "read"],
}
STORE_URL = "postgresql+psycopg://elasticity:secret@{address}/checkpoints"


@pytest.fixture(scope="module")
def unreachable_runs(
    silent, closed, kafka_bootstrap, tmp_path_factory
) -> dict[tuple[str, str, str], subprocess.CompletedProcess]:
    """Every command against each unreachable broker or store, started at once, each with a job and a folder of
    its own: each one waits out its own timeout (a few seconds on the silent listener), none waits for another."""
    started: dict[tuple[str, str, str], subprocess.Popen] = {}

    def config(key: tuple[str, str, str], **props: str) -> Path:
        folder = tmp_path_factory.mktemp("-".join(key).replace(" ", "-"))
        return write_properties(
            folder / "job.properties", job_props(f"fail-fast-{uuid.uuid4().hex[:8]}", "orders", folder, **props)
        )

    for name, address in (("silent", silent), ("closed", closed)):
        for command, args in KAFKA_COMMANDS.items():
            key = ("broker", name, command)
            started[key] = _start_cli(config(key, **{"systems.kafka.consumer.bootstrap.servers": address}), *args)
        env = {k: v for k, v in os.environ.items() if k != "ELASTICITY_HOME"}
        env |= {"KAFKA_BOOTSTRAP_SERVERS": address, "PYTHONPATH": str(REPO / "include")}
        started["broker", name, "topic create"] = _start([sys.executable, "-m", "elasticity", "topic", "create", "t"], env)
        for command, args in STORE_COMMANDS.items():
            key = ("store", name, command)
            props = {
                "systems.kafka.consumer.bootstrap.servers": kafka_bootstrap,
                "task.checkpoint.store.url": STORE_URL.format(address=address),
            }
            started[key] = _start_cli(config(key, **props), *args)
    return {key: _finish(proc) for key, proc in started.items()}


@pytest.mark.parametrize("broker", ["silent", "closed"])
@pytest.mark.parametrize("command", [*KAFKA_COMMANDS, "topic create"])
def test_a_broker_that_does_not_answer_fails_the_command_naming_it(request, unreachable_runs, broker, command):
    address = request.getfixturevalue(broker)
    done = unreachable_runs["broker", broker, command]
    _assert_one_error_line(done, f"Kafka broker unreachable at {address}")
    if broker == "silent":
        assert "does not answer a Kafka request" in done.stderr


@pytest.mark.parametrize("store", ["silent", "closed"])
@pytest.mark.parametrize("command", list(STORE_COMMANDS))
def test_a_store_that_does_not_answer_fails_the_command_before_the_broker_and_spark(request, unreachable_runs, store, command):
    address = request.getfixturevalue(store)
    done = unreachable_runs["store", store, command]
    _assert_one_error_line(
        done,
        f"checkpoint store unreachable at {STORE_URL.format(address=address).replace('secret', '***')}",
        "task.checkpoint.store.url",
    )
    assert "secret" not in done.stderr


@pytest.mark.parametrize("broker", ["silent", "closed"])
def test_the_lag_probe_fails_naming_the_broker_for_new_and_running_jobs(request, tmp_path, kafka_bootstrap, broker):
    """The lag probe (what the micro-batch DAG runs before Spark) asks the broker even for a job's first run."""
    address = request.getfixturevalue(broker)
    topic = f"ff-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    good = validate(job_props(f"ff-{topic}", topic, tmp_path, **{"systems.kafka.consumer.bootstrap.servers": kafka_bootstrap}))
    store = CheckpointStore(good.checkpoint_store_url())
    for started in (False, True):
        if started:
            from elasticity.batch.coordinator.job_coordinator import JobCoordinator

            JobCoordinator(good, store, KafkaInputs(good)).initialize("test")
        bad = good.with_overrides({"systems.kafka.consumer.bootstrap.servers": address})
        with pytest.raises(BrokerUnreachable, match=f"Kafka broker unreachable at {address}"):
            lag_report(bad, store, KafkaInputs(bad))


def test_the_store_probe_names_the_url_without_password(silent):
    with pytest.raises(StoreError, match=r"unreachable at postgresql\+psycopg://u:\*\*\*@") as e:
        CheckpointStore(f"postgresql+psycopg://u:pw@{silent}/db")
    assert "pw" not in str(e.value)


def _cli_env() -> dict[str, str]:
    """The environment of a `run-batch` subprocess: the job's config, not this session's overrides, says where."""
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "ELASTICITY_CHECKPOINT_STORE_URL")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "include"), str(REPO)])
    return env


def test_until_caught_up_prints_each_batch_as_it_commits(tmp_path, kafka_bootstrap):
    """Killed (SIGKILL) after its first summary line, a run has printed every batch it committed, and each
    batch it printed is committed."""
    topic = f"ff-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    send(kafka_bootstrap, topic, demo_records(400, keys=10, seed=5))
    props = job_props(
        f"ff-{topic}",
        topic,
        tmp_path,
        factor=1,
        **{"systems.kafka.consumer.bootstrap.servers": kafka_bootstrap, "spark.master": "local[1]"},
    )
    config = write_properties(tmp_path / "job.properties", props)
    env = _cli_env()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "elasticity",
            "run-batch",
            "--until-caught-up",
            "--max-records",
            "20",
            "--config",
            str(config),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        first = json.loads(proc.stdout.readline())  # printed while the run goes on (20 batches are due)
        proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
    printed = [first] + [json.loads(line) for line in rest.splitlines() if line.strip()]
    assert first["batch_id"] == 1 and 1 <= first["records_read"] <= 20
    ids = [s["batch_id"] for s in printed]
    assert ids == list(range(1, len(ids) + 1))  # in commit order, none missing
    committed = set(CheckpointStore(validate(props).checkpoint_store_url()).batches_with_status(props["job.name"], "committed"))
    assert set(ids) <= committed  # every batch printed had committed
    assert all(b > len(ids) for b in committed - set(ids))  # unprinted: only the commit in flight when killed


ENGINE_DEADLINE_S = 30  # every attempt against a dead or silent Spark Connect server ends within this


def _assert_engine_named(done: subprocess.CompletedProcess, address: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "RETRIES_EXCEEDED" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: Spark Connect server sc://{address} unreachable"), done.stderr
    assert "elasticity cluster start" in line


@pytest.mark.parametrize("server", ["silent", "closed"])
def test_a_connect_server_that_does_not_answer_fails_run_batch_within_30s_naming_it(request, tmp_path, kafka_bootstrap, server):
    """Building the session (and setting its config) never waits in pyspark's retry loop: a closed port or a
    listener that accepts and stays silent ends the attempt in one line naming the server, twice in a row
    (an Airflow retry is the second attempt)."""
    address = request.getfixturevalue(server)
    topic = f"ff-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    send(kafka_bootstrap, topic, demo_records(50, keys=5, seed=3))
    props = job_props(
        f"ff-{topic}",
        topic,
        tmp_path,
        **{"systems.kafka.consumer.bootstrap.servers": kafka_bootstrap, "spark.remote": f"sc://{address}"},
    )
    config = write_properties(tmp_path / "job.properties", props)
    for _attempt in range(2):
        started = time.monotonic()
        done = _cli(config, "run-batch")
        assert time.monotonic() - started < ENGINE_DEADLINE_S
        _assert_engine_named(done, address)
        if server == "silent":
            assert "does not answer gRPC" in done.stderr


def test_a_connect_server_killed_mid_batch_fails_the_run_within_30s_naming_it(tmp_path, kafka_bootstrap):
    """The driver SIGKILLed while a run goes on: the run ends within 30 s of the kill, in one line naming the
    server; what it had committed stays committed."""
    from elasticity.local.connect_server import SparkConnectServer

    server = SparkConnectServer(tmp_path / "spark")
    state = server.start(port=free_port(), master="local[1]")
    try:
        topic = f"ff-{uuid.uuid4().hex[:8]}"
        create_topic(kafka_bootstrap, topic, 2)
        send(kafka_bootstrap, topic, demo_records(2000, keys=10, seed=9))
        props = job_props(
            f"ff-{topic}",
            topic,
            tmp_path,
            factor=2,
            **{"systems.kafka.consumer.bootstrap.servers": kafka_bootstrap, "spark.remote": state.remote},
        )
        config = write_properties(tmp_path / "job.properties", props)
        env = _cli_env()
        proc = subprocess.Popen(
            [sys.executable, "-m", "elasticity", "run-batch", "--until-caught-up", "--max-records", "10"]
            + ["--config", str(config)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = json.loads(proc.stdout.readline())  # one batch committed; 199 more are due
            os.kill(state.pid, signal.SIGKILL)
            killed = time.monotonic()
            _, stderr = proc.communicate(timeout=HANG_GUARD_S)
            took = time.monotonic() - killed
        finally:
            proc.kill()
            proc.wait()
        print(f"the run failed {took:.1f} s after the kill")
        assert took < ENGINE_DEADLINE_S, f"{took:.1f} s after the kill: {stderr}"
        _assert_engine_named(subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr), state.address)
        committed = CheckpointStore(validate(props).checkpoint_store_url()).batches_with_status(props["job.name"], "committed")
        assert first["batch_id"] in committed
    finally:
        server.stop()


def test_an_error_raised_while_the_connect_server_is_down_names_the_server(spark_connect):
    """A run that fails elsewhere than in a Spark call (its commit waited for the snapshots its lost executors
    had promised) when the driver is gone says so, naming the server; with the server up, the error is its own."""
    from elasticity.spark.session import EngineUnreachable, connect_address, connect_errors
    from elasticity.state.backends.blob_manager import UploadStalled

    down = f"127.0.0.1:{free_port()}"
    stalled = UploadStalled("upload of blob 'x/index/1-2-3.json' stalled: no sign of life from its uploader for 20 s")
    named = f"^Spark Connect server sc://{down} unreachable"
    with pytest.raises(EngineUnreachable, match=named) as caught, connect_errors(f"sc://{down}"):
        raise stalled
    assert caught.value.__cause__ is stalled
    with pytest.raises(UploadStalled), connect_errors(f"sc://{connect_address(spark_connect)}"):
        raise stalled
