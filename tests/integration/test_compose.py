"""docker-compose.yaml, validated by a real Compose implementation (Debian's
docker-compose 1.29; no engine runs here), checked for what the DAGs need, for
secrets that come only from `.env`, and for carrying the settings the local
set-ups run with (tests/integration/test_scheduler_postgres.py, test_celery.py):
the metadata database of `elasticity airflow --db`, the CeleryExecutor of
`--executor celery` (Redis, two workers, the heartbeat timeout), the connections,
the cluster's job configs on the shared S3 storage."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import yaml

from elasticity.cli import build_parser
from elasticity.config import load_config
from elasticity.local.celery_topology import CELERY_EXECUTOR, HEARTBEAT_TIMEOUT_S, QUEUED_TIMEOUT_S
from elasticity.local.standalone import (
    METADATA_DATABASE,
    STORE_DATABASE,
    AirflowDb,
    airflow_db,
    connections,
)
from tests.conftest import REPO

COMPOSE = shutil.which("docker-compose")
assert COMPOSE, "docker-compose is installed by `make test` (apt); run the tests through make"
FILE = REPO / "docker-compose.yaml"
CELERY_WORKERS = ("airflow-worker-1", "airflow-worker-2")
AIRFLOW = (
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    *CELERY_WORKERS,
)
WORKERS = ("spark-worker-1", "spark-worker-2")
SHARED_STORAGE = ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def secrets() -> dict[str, str]:
    """Every variable .env.example lists, each with a value of its own."""
    names = [
        line.split("=", 1)[0]
        for line in (REPO / ".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    ]
    return {name: f"value-of-{name.lower()}" for name in names}


def run_config(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`docker-compose config` in a folder of its own (no stray .env), with exactly `env`'s variables."""
    clean = {k: v for k, v in os.environ.items() if k not in secrets()}
    return subprocess.run(
        [COMPOSE, "-f", str(path), "--project-directory", str(path.parent), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )


def config(tmp_path: Path) -> dict:
    copy = tmp_path / "docker-compose.yaml"
    copy.write_text(FILE.read_text())
    out = run_config(copy, secrets())
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_compose_file_is_valid_and_has_every_service(tmp_path):
    c = config(tmp_path)
    services = c["services"]
    assert {
        "kafka",
        "create-demo-topic",
        "s3",
        "spark-master",
        *WORKERS,
        "spark-connect",
        "postgres",
        "redis",
        *AIRFLOW,
    } <= set(services)
    ports = [
        p["published"] if isinstance(p, dict) else str(p).split(":")[0] for s in services.values() for p in s.get("ports", [])
    ]
    assert len(ports) == len(set(map(str, ports))), f"a host port is published twice: {ports}"
    declared = set(c.get("volumes", {}))
    for name, s in services.items():
        for v in s.get("volumes", []):
            source = v["source"] if isinstance(v, dict) else v.split(":")[0]
            assert source.startswith(("/", ".")) or source in declared, f"{name} mounts undeclared volume {source}"


def test_every_long_running_service_is_started_again_when_it_dies(tmp_path):
    """A driver, broker, worker or scheduler that dies comes back (`docker stop` still stops it); the one-shot
    set-up services run once."""
    services = config(tmp_path)["services"]
    once = {"create-demo-topic", "airflow-init"}
    assert {name: s.get("restart") for name, s in services.items() if name in once} == dict.fromkeys(once, "no")
    assert {name: s.get("restart") for name, s in services.items() if name not in once} == {
        name: "unless-stopped" for name in services if name not in once
    }


def test_every_secret_comes_from_env_and_a_missing_one_stops_compose_naming_it(tmp_path):
    text = FILE.read_text()
    listed = set(secrets())
    required = set(re.findall(r"\$\{(\w+):\?[^}]*\1[^}]*\}", text))  # ${VAR:?message naming VAR}
    assert required == listed, f".env.example lists {sorted(listed)}, the compose file requires {sorted(required)}"
    assert set(re.findall(r"\$\{(\w+)", text)) == listed  # no other variable
    assert not re.search(r"\$\{\w+:?-", text), "a fallback value"
    for line in (REPO / ".env.example").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            assert line.endswith("="), f".env.example holds a value: {line}"
    for line in text.splitlines():
        if not line.strip().startswith("#") and re.search(r"PASSWORD|SECRET|KEY_ID|postgres(ql)?(\+\w+)?://", line):
            assert "${" in line or "*" in line or line.rstrip().endswith(":"), f"secret in plain text: {line.strip()}"
    copy = tmp_path / "docker-compose.yaml"
    copy.write_text(text)
    for name in sorted(listed):
        out = run_config(copy, {k: v for k, v in secrets().items() if k != name})
        assert out.returncode != 0 and f"{name} is not set" in out.stderr, out.stderr
    out = run_config(copy, {**secrets(), "S3_SECRET_KEY": ""})  # empty is missing too
    assert out.returncode != 0 and "S3_SECRET_KEY is not set" in out.stderr
    (tmp_path / ".env").write_text((REPO / ".env.example").read_text())  # copied and not filled in
    out = run_config(copy, {})
    assert out.returncode != 0 and "is not set" in out.stderr


def test_airflow_runs_as_the_local_postgres_set_up(tmp_path):
    services = config(tmp_path)["services"]
    for name in AIRFLOW:
        env = services[name]["environment"]
        db = AirflowDb(env["ELASTICITY_DB_SERVER"])  # what `elasticity airflow --db <server> --executor celery` sets
        assert db.env(CELERY_EXECUTOR).items() <= env.items() and env["AIRFLOW__CORE__EXECUTOR"] == CELERY_EXECUTOR
        assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://redis:6379/0"
        assert env["AIRFLOW__CELERY__RESULT_BACKEND"] == f"db+{db.metadata_url}"
        assert env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"] == str(HEARTBEAT_TIMEOUT_S)
        assert env["AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT"] == str(QUEUED_TIMEOUT_S)
        assert not env["ELASTICITY_HOME"].startswith("/opt/elasticity"), "scratch of its own, not the shared mount"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith(f"@postgres:5432/{METADATA_DATABASE}")
        assert env["AIRFLOW_CONN_ELASTICITY_STORE"].endswith(f"@postgres:5432/{STORE_DATABASE}")
        assert services["postgres"]["environment"]["POSTGRES_DB"] == METADATA_DATABASE
        # the connections are those of the local set-up, pointing at the services
        local = connections("kafka:19092", "sc://spark-connect:15002", "unused")
        for conn in ("AIRFLOW_CONN_KAFKA_DEFAULT", "AIRFLOW_CONN_SPARK_DEFAULT"):
            assert json.loads(env[conn]) == json.loads(local[conn]), f"{name}: {conn}"
        assert set(SHARED_STORAGE) <= set(env) and env["AWS_ENDPOINT_URL"] == "http://s3:8333"
        assert any("/opt/elasticity" in str(v) for v in services[name]["volumes"])
    # two Celery workers, each a host of its own, on the Redis service
    for name in CELERY_WORKERS:
        assert services[name]["command"] == ["celery", "worker"] and services[name]["hostname"] == name
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["redis"]["image"].startswith("redis:")
    # airflow-init is the local set-up's own: `elasticity airflow --db <server> --init-only`
    program, *argv = shlex.split(services["airflow-init"]["command"][-1])
    args = build_parser().parse_args(argv)
    assert program == "elasticity" and args.command == "airflow" and args.init_only
    assert args.db.lstrip("$") == "ELASTICITY_DB_SERVER"
    assert airflow_db(services["airflow-init"]["environment"]["ELASTICITY_DB_SERVER"]).server


def test_the_jobs_run_on_the_cluster_with_shared_storage(tmp_path):
    services = config(tmp_path)["services"]
    jobs = services["airflow-scheduler"]["environment"]["ELASTICITY_JOBS_DIR"]
    folder = REPO / Path(jobs).relative_to("/opt/elasticity")
    assert folder == REPO / "include" / "jobs" / "cluster"  # the folder test_scheduler_postgres.py runs
    for path in folder.glob("*.properties"):
        job = load_config(path)
        for key in ("blob.store.uri", "job.output.path", "job.audit.path", "job.dead.letter.path"):
            assert job.get(key, "").startswith("s3://"), f"{path.name}: {key} is not on the shared storage"
    connect = " ".join(services["spark-connect"]["command"])
    assert "--master spark://spark-master:7077" in connect and "SparkConnectServer" in connect
    assert "org.apache.spark.deploy.master.Master" in services["spark-master"]["command"]
    core = {
        re.split(r"[<>=!~\[ ]", d)[0] for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    for name in WORKERS:
        worker = services[name]
        command = " ".join(worker["command"])
        assert "org.apache.spark.deploy.worker.Worker spark://spark-master:7077" in command
        installed = {re.split(r"\[", t.strip("'"))[0] for t in command.split("&&")[0].split("requirements.txt")[1].split()}
        assert installed == core - {"noida-db"}, "executors need the core's packages (the embedded broker aside)"
        env = worker["environment"]
        assert set(SHARED_STORAGE) <= set(env)
        assert not env["ELASTICITY_HOME"].startswith("/opt/elasticity"), "a worker's local state on the shared mount"
    assert services["s3"]["environment"]["AWS_ACCESS_KEY_ID"] == services[WORKERS[0]]["environment"]["AWS_ACCESS_KEY_ID"]


def test_the_validator_rejects_a_broken_file(tmp_path):
    bad = tmp_path / "docker-compose.yaml"
    bad.write_text(
        FILE.read_text()
        .replace('- "9092:9092"', "- {published: true}")
        .replace("kafka-data:/var/lib/kafka/data", "missing-volume:/var/lib/kafka/data")
    )
    assert run_config(bad, secrets()).returncode != 0
