"""Waiting on a real Airflow (`airflow standalone`) in the scheduler tests: until a condition holds, or
fail with the tail of Airflow's log; and the DAG runs that have ended."""

from __future__ import annotations

import time

import pytest

from elasticity.local.standalone import AirflowStandalone


def wait_for(predicate, timeout_s: float, what: str, airflow: AirflowStandalone):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(3)
    pytest.fail(f"{what} within {timeout_s:.0f}s; airflow log:\n{airflow.tail(40)}")


def finished(api, dag_id: str, run_filter=lambda r: True) -> list[dict]:
    return [r for r in api.runs(dag_id) if r["state"] in ("success", "failed") and run_filter(r)]
