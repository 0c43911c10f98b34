"""The store's SQLAlchemy engine: SQLite (a file in WAL mode, or in memory) or a PostgreSQL server."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import StaticPool
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from elasticity.checkpoint.store.store_errors import StoreError, StoreUnavailable

CONNECT_TIMEOUT_S = 5
SQLITE_BUSY_TIMEOUT_S = 30


def make_engine(url: str) -> Engine:
    if url in ("sqlite://", "sqlite:///:memory:"):
        return create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    if url.startswith("sqlite"):
        if database := make_url(url).database:  # the default under a new project's $ELASTICITY_HOME, not made yet
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            cur = dbapi_conn.cursor()
            _write_ahead_log(cur)
            cur.execute("PRAGMA synchronous=FULL")  # a commit survives power loss, as a checkpoint must
            cur.close()

        return engine
    # a server that accepts and never answers fails the connection here, instead of hanging for minutes
    return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT_S})


def _write_ahead_log(cur: sqlite3.Cursor) -> None:
    """WAL mode, so that readers do not block the committing writer. The mode is the file's: only a new store
    switches, and a switch needs the file to itself. SQLite refuses it at once ("database is locked", no busy
    wait) while another connection holds the write lock, as another process making the new store's tables
    under the migration lock does: wait for that lock as the busy timeout would, then switch (or find it done)."""
    Retrying(
        retry=retry_if_exception(lambda e: isinstance(e, sqlite3.OperationalError) and "locked" in str(e)),
        stop=stop_after_delay(SQLITE_BUSY_TIMEOUT_S),
        wait=wait_fixed(0.02),
        reraise=True,
    )(cur.execute, "PRAGMA journal_mode=WAL")


def masked(url: str) -> str:
    """The URL as logs and errors may show it: no password."""
    return make_url(url).render_as_string(hide_password=True)


def unreachable(url: str, e: OperationalError) -> StoreError:
    """The error of a store whose first connection (its probe) failed, naming its address."""
    return StoreError(
        f"checkpoint store unreachable at {masked(url)} (task.checkpoint.store.url / ELASTICITY_CHECKPOINT_STORE_URL): {_reason(e)}"
    )


ROWS = {  # the store module a read or write runs, as its errors name what was being done
    "batch_rows": "batches",
    "checkpoint_rows": "checkpoints",
    "generation_rows": "generations",
    "health_rows": "health records",
    "leases": "the lease",
    "metric_rows": "metrics",
    "quality_rows": "data-quality rows",
    "retention": "for retention",
    "transactional_ids": "transactional ids",
}


def doing(step) -> str:
    module = getattr(step, "__module__", "").rsplit(".", 1)[-1]
    return ROWS.get(module, getattr(step, "__name__", "rows"))


def _reason(e: DBAPIError) -> str:
    text = str(e.orig or e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def unavailable(url: str, doing: str, job: object, e: DBAPIError) -> StoreUnavailable:
    """The error of a store that went away after its probe: address, job, what was being done, the reason."""
    of_job = f" of job {job!r}" if isinstance(job, str) else ""
    return StoreUnavailable(f"checkpoint store at {masked(url)} failed while {doing}{of_job}: {_reason(e)}")
