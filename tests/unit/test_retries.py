"""The retries keep their bounds, pauses and log lines: Airflow's API on a 5xx, a sink read racing a compaction,
and a store write racing another writer. Pauses are recorded, not slept."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest
from sqlalchemy.exc import IntegrityError

from elasticity.batch.sinks import outputs
from elasticity.checkpoint.store import RACE_ATTEMPTS, CheckpointStore
from elasticity.local import airflow_api
from elasticity.local.airflow_api import AirflowApi, ApiError


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


class _Answer:
    def __init__(self, status: int) -> None:
        self.status_code, self.text = status, f"status {status}"
        self.content = b"{}"

    def json(self) -> dict:
        return {"status": self.status_code}


def _answering(monkeypatch, *statuses: int) -> list[str]:
    calls, left = [], list(statuses)

    def request(method: str, url: str, **kw) -> _Answer:
        calls.append(method)
        return _Answer(left.pop(0))

    monkeypatch.setattr(airflow_api.requests, "request", request)
    return calls


def test_a_get_answered_5xx_is_tried_again_with_a_longer_pause_each_time(monkeypatch, pauses, caplog):
    calls = _answering(monkeypatch, 503, 500, 200)
    with caplog.at_level(logging.WARNING, logger="elasticity"):
        assert AirflowApi("http://airflow", "t").dag("d") == {"status": 200}
    assert calls == ["GET"] * 3 and pauses == [0.5, 1.0]
    assert [r.getMessage() for r in caplog.records] == [
        "GET /dags/d: 503 status 503; retrying",
        "GET /dags/d: 500 status 500; retrying",
    ]


def test_the_last_answer_stands_after_four_tries_and_a_call_naming_no_status_is_not_tried_again(monkeypatch, pauses):
    calls = _answering(monkeypatch, 503, 503, 503, 502)
    with pytest.raises(ApiError, match="GET /dags/d: 502") as e:
        AirflowApi("http://airflow", "t").dag("d")
    assert e.value.status == 502 and len(calls) == airflow_api.API_ATTEMPTS and pauses == [0.5, 1.0, 1.5]
    calls = _answering(monkeypatch, 503)
    with pytest.raises(ApiError):
        AirflowApi("http://airflow", "t")._call("POST", "/dags/d/clearTaskInstances", json={})
    assert calls == ["POST"]


def test_pausing_a_dag_is_tried_again_on_a_database_error(monkeypatch, pauses):
    # setting is_paused twice is setting it once; SQLite's write lock answers 500 "Database error"
    calls = _answering(monkeypatch, 500, 200)
    AirflowApi("http://airflow", "t").unpause("d", paused=True)
    assert calls == ["PATCH", "PATCH"]


def test_a_sink_read_lists_again_when_a_file_vanished_three_times_at_most(monkeypatch):
    listings, vanished = [], [2]

    def read_files(root, files, schema, ids):
        if len(listings) <= vanished[0]:
            raise FileNotFoundError("compacted meanwhile")
        return "rows"

    monkeypatch.setattr(outputs, "list_root", lambda root: listings.append(root) or SimpleNamespace(live=[]))
    monkeypatch.setattr(outputs, "read_files", read_files)
    assert outputs.read_table("root", outputs.AUDIT_SCHEMA) == "rows" and len(listings) == 3
    listings.clear()
    vanished[0] = 3
    with pytest.raises(FileNotFoundError, match="compacted meanwhile"):
        outputs.read_table("root", outputs.AUDIT_SCHEMA)
    assert len(listings) == 3


def test_a_write_losing_every_race_fails_with_the_integrity_error(tmp_path, monkeypatch, pauses):
    store = CheckpointStore(f"sqlite:///{tmp_path / 'store.db'}")
    tries = []

    def racing(conn, job):
        tries.append(job)
        raise IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed"))

    with pytest.raises(IntegrityError):
        store._retried(racing, "j")
    assert len(tries) == RACE_ATTEMPTS and len(pauses) == RACE_ATTEMPTS - 1
    assert all(0 <= p <= 0.01 * (n + 1) for n, p in enumerate(pauses))
