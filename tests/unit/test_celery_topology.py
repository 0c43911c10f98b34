"""The Celery topology's pieces that need no root, no Airflow process and no server: the components'
environment, the worker hosts' names, `elasticity airflow --executor celery`'s options, the fault
point's hold. The topology itself runs in tests/integration/test_celery.py."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from elasticity import faults
from elasticity.airflow.worker_host import CALLABLE, HOSTNAME_ENV, hostname
from elasticity.cli import build_parser
from elasticity.local.celery_topology import CELERY_EXECUTOR, HEARTBEAT_TIMEOUT_S, CeleryTopology, loopback_ports
from elasticity.local.standalone import LOCAL_POSTGRES, AirflowDb, MetadataDbError
from elasticity.local.worker_hosts import WorkerHosts


def test_loopback_ports_are_read_from_urls_and_json_connections():
    env = {
        "AIRFLOW__CELERY__BROKER_URL": "redis://127.0.0.1:6390/0",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql+psycopg://postgres@127.0.0.1:5432/x",
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "elasticity_kafka", "host": "127.0.0.1", "port": 19092}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": 15002}),
        "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
        "ELSEWHERE": "http://10.0.0.5:9000",
        "EMPTY": None,
    }
    assert loopback_ports(env) == {6390, 5432, 19092, 15002, 8333}


def test_every_component_runs_the_celery_executor_with_shared_secrets_and_each_worker_a_host_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("ELASTICITY_PROJECT_DIR", str(tmp_path / "project"))
    (tmp_path / "project" / "dags").mkdir(parents=True)
    (tmp_path / "project" / "plugins").mkdir()
    (tmp_path / "project" / "include" / "jobs").mkdir(parents=True)
    library = str(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([library, str(tmp_path / "project")]))
    db = AirflowDb(LOCAL_POSTGRES, "m", "s")
    topology = CeleryTopology(tmp_path / "t", db, "redis://127.0.0.1:6390/0", port=8099, workers=2, tag="abcde")
    env = topology.env()
    assert env["AIRFLOW__CORE__EXECUTOR"] == CELERY_EXECUTOR
    assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://127.0.0.1:6390/0"
    assert env["AIRFLOW__CELERY__RESULT_BACKEND"] == f"db+{LOCAL_POSTGRES}/m"
    assert env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"] == str(HEARTBEAT_TIMEOUT_S) == "90"
    assert env["AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT"] == "120"
    assert env["AIRFLOW__CORE__HOSTNAME_CALLABLE"] == CALLABLE
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:8099/execution/"
    one, two = topology.worker_env(1), topology.worker_env(2)
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY", "AIRFLOW__CORE__FERNET_KEY"):
        assert env[key] and one[key] == two[key] == env[key] == topology.env()[key]  # one secret for all
    assert (one[HOSTNAME_ENV], two[HOSTNAME_ENV]) == ("10.250.1.2", "10.250.2.2")
    assert len({one["ELASTICITY_HOME"], two["ELASTICITY_HOME"], env.get("ELASTICITY_HOME")}) == 3
    assert one["AIRFLOW_HOME"] != env["AIRFLOW_HOME"]
    assert one["PYTHONPATH"] == library  # the project's folder is not on a worker's path
    assert 8099 in topology.shared_ports() and {5432, 6390} <= set(topology.shared_ports())
    argv, _, cwd = topology._command("worker-2")
    assert argv[:4] == ["ip", "netns", "exec", "elx-abcde-w2"] and argv[5:7] == ["celery", "worker"]
    assert cwd == tmp_path / "t" / "workers" / "w2" / "work"


def test_the_celery_executor_needs_a_database_server(tmp_path):
    with pytest.raises(MetadataDbError, match="--db postgres"):
        CeleryTopology(tmp_path, AirflowDb(), "redis://127.0.0.1:6379/0")


def test_worker_hosts_are_named_by_the_tag_within_linux_limits(tmp_path):
    hosts = WorkerHosts(3, tmp_path, tag="f00ba")
    assert [h.netns for h in hosts.hosts] == ["elx-f00ba-w1", "elx-f00ba-w2", "elx-f00ba-w3"]
    assert [h.address for h in hosts.hosts] == ["10.250.1.2", "10.250.2.2", "10.250.3.2"]
    assert all(len(n) <= 15 for h in hosts.hosts for n in (h.link, h.peer))
    assert len({WorkerHosts(1, tmp_path).tag for _ in range(20)}) > 1
    with pytest.raises(ValueError):
        WorkerHosts(0, tmp_path)


def test_the_hostname_airflow_records_is_the_worker_hosts_address(monkeypatch):
    monkeypatch.setenv(HOSTNAME_ENV, "10.250.1.2")
    assert hostname() == "10.250.1.2"
    monkeypatch.delenv(HOSTNAME_ENV)
    assert hostname() == socket.getfqdn()


def test_the_airflow_command_takes_the_celery_executor():
    args = build_parser().parse_args(["airflow", "--executor", "celery", "--workers", "3", "--db", "postgres", "--redis", "own"])
    assert (args.executor, args.workers, args.db, args.redis) == ("celery", 3, "postgres", "own")
    args = build_parser().parse_args(["airflow"])
    assert (args.executor, args.workers, args.redis) == ("local", 2, None)


def test_a_hold_takes_one_process_and_waits_until_released(tmp_path, monkeypatch):
    monkeypatch.setenv("ELASTICITY_FAULT", f"commit.before_fence:hold:{tmp_path}")
    faults.point("commit.before_fence")  # unarmed: passes
    (tmp_path / "commit.before_fence.armed").touch()
    done = threading.Event()
    threading.Thread(target=lambda: (faults.point("commit.before_fence"), done.set()), daemon=True).start()
    held = tmp_path / "commit.before_fence.held"
    deadline = time.monotonic() + 10
    while not (held.exists() and held.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert json.loads(held.read_text())["pid"] == os.getpid()
    assert not done.wait(0.3)  # held
    faults.point("commit.before_fence")  # disarmed: another process passes
    held.unlink()
    assert done.wait(5)
