"""docker-compose.yaml, validated by a real Compose implementation (Debian's
docker-compose 1.29; no engine runs here) and checked for what the DAGs need."""

import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO

COMPOSE = shutil.which("docker-compose")
pytestmark = pytest.mark.skipif(COMPOSE is None, reason="docker-compose is installed by `make test` (apt); run it through make")


def config(path) -> dict:
    out = subprocess.run([COMPOSE, "-f", str(path), "config"], capture_output=True, text=True, timeout=60, cwd=path.parent)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_compose_file_is_valid_and_has_every_service():
    c = config(REPO / "docker-compose.yaml")
    services = c["services"]
    assert {
        "kafka",
        "create-demo-topic",
        "spark-master",
        "spark-worker-1",
        "spark-worker-2",
        "postgres",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
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


def test_airflow_services_get_the_connections_the_dags_read():
    services = config(REPO / "docker-compose.yaml")["services"]
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        env = services[name]["environment"]
        for conn in ("AIRFLOW_CONN_KAFKA_DEFAULT", "AIRFLOW_CONN_ELASTICITY_STORE", "AIRFLOW_CONN_SPARK_DEFAULT"):
            assert conn in env, f"{name} lacks {conn}"
        assert "kafka" in env["AIRFLOW_CONN_KAFKA_DEFAULT"] and "spark-master" in env["AIRFLOW_CONN_SPARK_DEFAULT"]
        assert "@postgres:5432" in env["AIRFLOW_CONN_ELASTICITY_STORE"]
        assert any("/opt/elasticity" in str(v) for v in services[name]["volumes"])


def test_no_secret_in_plain_text():
    for line in (REPO / "docker-compose.yaml").read_text().splitlines():
        if line.strip().startswith("#"):
            continue
        if re.search(r"PASSWORD|SECRET|postgres(ql)?(\+\w+)?://", line):
            assert "${" in line, f"secret in plain text: {line.strip()}"


def test_the_validator_rejects_a_broken_file(tmp_path):
    bad = tmp_path / "docker-compose.yaml"
    bad.write_text(
        (REPO / "docker-compose.yaml")
        .read_text()
        .replace('- "9092:9092"', "- {published: true}")
        .replace("kafka-data:/var/lib/kafka/data", "missing-volume:/var/lib/kafka/data")
    )
    out = subprocess.run([COMPOSE, "-f", str(bad), "config"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
