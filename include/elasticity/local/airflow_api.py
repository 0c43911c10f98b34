"""Airflow's REST API (`/api/v2`) with a bearer token: what the UI's buttons call. The story, the
tests and the benchmarks drive Airflow through it as a person does."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import requests
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_attempt, wait_incrementing

log = logging.getLogger(__name__)

API_ATTEMPTS = 4


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _answer(state: RetryCallState) -> requests.Response:
    """The response of the try `state` describes."""
    assert state.outcome is not None
    return state.outcome.result()


@dataclass
class AirflowApi:
    """Airflow's REST API with a bearer token: what the UI's buttons call."""

    base: str
    token: str

    def _call(self, method: str, path: str, retry_on: tuple[int, ...] = (), **kw: Any) -> Any:
        """One request; a GET (and a call naming `retry_on` statuses, which must be idempotent) is retried a few
        times on a 5xx: on SQLite the API answers "Database error" while the scheduler holds the write lock."""
        retry = (500, 502, 503, 504) if method == "GET" else retry_on

        def retrying(state: RetryCallState) -> None:
            r = _answer(state)
            log.warning("%s %s: %s %s; retrying", method, path, r.status_code, r.text[:200])

        r = Retrying(
            retry=retry_if_result(lambda r: r.status_code in retry),
            stop=stop_after_attempt(API_ATTEMPTS),
            wait=wait_incrementing(start=0.5, increment=0.5),
            before_sleep=retrying,
            retry_error_callback=_answer,  # the last answer stands, whatever its status
        )(
            requests.request,
            method,
            f"{self.base}/api/v2{path}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
            **kw,
        )
        if r.status_code >= 400:
            raise ApiError(r.status_code, f"{method} {path}: {r.status_code} {r.text[:500]}")
        return r.json() if r.content else None

    def dag(self, dag_id: str) -> dict:
        return self._call("GET", f"/dags/{dag_id}")

    def wait_dag(self, dag_id: str, timeout_s: float = 180) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.dag(dag_id)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)

    def unpause(self, dag_id: str, *, paused: bool = False) -> None:
        self._call("PATCH", f"/dags/{dag_id}", retry_on=(500, 503), json={"is_paused": paused})  # idempotent

    def trigger(self, dag_id: str, conf: dict | None = None) -> str:
        """As the trigger form does: a run now with its params. The run id is chosen here, so a retried
        trigger is idempotent: a 409 after a 5xx means the first attempt created the run."""
        run_id = f"manual__{datetime.now(UTC).isoformat()}__{uuid.uuid4().hex[:6]}"
        body = {"dag_run_id": run_id, "logical_date": None, "conf": conf or {}}
        try:
            return self._call("POST", f"/dags/{dag_id}/dagRuns", retry_on=(500, 503), json=body)["dag_run_id"]
        except ApiError as e:
            if e.status == 409 and self.run(dag_id, run_id)["dag_run_id"] == run_id:
                return run_id
            raise

    def runs(self, dag_id: str) -> list[dict]:
        return self._call("GET", f"/dags/{dag_id}/dagRuns", params={"order_by": "-start_date", "limit": 100})["dag_runs"]

    def run(self, dag_id: str, run_id: str) -> dict:
        return self._call("GET", f"/dags/{dag_id}/dagRuns/{run_id}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self._call("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float = 300) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.run(dag_id, run_id)
            if run["state"] in ("success", "failed"):
                return run
            time.sleep(2)
        raise TimeoutError(f"{dag_id} run {run_id} not finished within {timeout_s:.0f}s")

    def wait_idle(self, dag_id: str, timeout_s: float = 900) -> None:
        """Until no run of the DAG is queued or running."""
        deadline = time.monotonic() + timeout_s
        while [r for r in self.runs(dag_id) if r["state"] in ("queued", "running")]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id} still busy after {timeout_s:.0f}s")
            time.sleep(2)

    def log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        r = requests.get(
            f"{self.base}/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/x-ndjson"},
            timeout=30,
        )
        return r.text
