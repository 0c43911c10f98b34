"""Under a distributed executor, a job whose reports (or SQLite store) sit on one host's disk is warned at its
config check: the executor is read from Airflow's configuration, in the Airflow layer only."""

from __future__ import annotations

import pytest

from elasticity.config import ConfigWarning, validate

BASE = {
    "job.name": "j",
    "task.inputs": "kafka.orders",
    "task.checkpoint.store.url": "postgresql+psycopg://u@db:5432/store",
    "job.output.path": "s3://state/j/output",
    "job.audit.path": "s3://state/j/audit",
}


def test_a_report_folder_under_a_distributed_executor_is_warned_and_an_object_store_is_not(monkeypatch, tmp_path):
    from elasticity.airflow.shared_state import check_shared_state, executors, one_host_only

    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")
    assert executors() == ("CeleryExecutor",)
    local = validate({**BASE, "job.report.path": str(tmp_path / "reports")})
    (note,) = one_host_only(local, executors())
    assert str(tmp_path / "reports") in note and "CeleryExecutor" in note and "job.report.path" in note
    with pytest.warns(ConfigWarning, match="data-quality reports go to the folder"):
        assert check_shared_state(local) == [note]
    on_s3 = validate({**BASE, "blob.store.uri": "s3://state/j/blobs"})  # the reports go beside the snapshots
    assert one_host_only(on_s3, ("CeleryExecutor",)) == []
    assert one_host_only(local, ("LocalExecutor",)) == one_host_only(local, ("SequentialExecutor",)) == []
    sqlite = validate({**BASE, "blob.store.uri": "s3://state/j/blobs", "task.checkpoint.store.url": "sqlite:///x.db"})
    assert ["SQLite" in n for n in one_host_only(sqlite, ("KubernetesExecutor",))] == [True]
    defaults = validate({k: v for k, v in BASE.items() if k != "job.audit.path"} | {"blob.store.uri": "s3://state/j/blobs"})
    (note,) = one_host_only(defaults, ("CeleryExecutor",))
    assert "job.audit.path=" in note and "job.output.path" not in note


def test_executors_are_named_by_their_class_whatever_the_form(monkeypatch):
    from elasticity.airflow.shared_state import executors

    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "LocalExecutor, k8s:airflow.providers.cncf.kubernetes.KubernetesExecutor")
    assert executors() == ("LocalExecutor", "KubernetesExecutor")
