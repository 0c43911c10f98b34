"""A store's schema brought to `HEAD_REVISION` when the store is opened; Alembic's revisions
(schema_migrations/) bring a store written by an earlier version.

- A store whose version table holds `HEAD_REVISION` opens as it is: two small queries (is there a version
  table, what it holds), no migration script loaded, Alembic not even imported (half a second). The store is
  opened by every task, trigger poll and page.
- Any other store is brought there in one transaction that first takes the store's migration lock
  (PostgreSQL: a transaction-level advisory lock; SQLite: BEGIN IMMEDIATE, the database's write lock) and
  reads the revision again: of the processes that open a new store at once, one makes it and the others find
  it made. Both databases roll DDL back with the transaction: a failed migration leaves the store as it was.
  - None of the store's tables and no version: a new store. Its tables are made from `store_schema` and the
    version table says `HEAD_REVISION`, as Alembic would stamp it (Alembic's recipe for a new database;
    tests/unit/test_store_schema.py checks that the revisions build the same).
  - Tables but no version: a store written before the store had versions. Alembic runs the revisions from
    the baseline, which adds what its layout lacks (the tables, columns and index that `create_all` and
    hand-written ALTERs added on every open before), and records each revision it runs.
  - An older revision: Alembic runs the revisions after it.
  - A revision this code does not know (a newer version upgraded the store): refused, nothing changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, insert, inspect, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_incrementing

from elasticity.checkpoint.store.store_errors import StoreError
from elasticity.checkpoint.store.store_schema import HEAD_REVISION, VERSION_TABLE, metadata, version

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

SCRIPTS = Path(__file__).resolve().with_name("schema_migrations")
MIGRATION_LOCK = 0x656C61737469  # PostgreSQL's advisory lock key of a store's migration ("elasti")
SCHEMA_ATTEMPTS = 5


def stored_revision(conn: Connection) -> str | None:
    """The revision the store's version table holds; None without one (a new store, or an unversioned one)."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    return conn.execute(select(version.c.version_num)).scalar()


def ensure_schema(engine: Engine) -> None:
    """The store at `HEAD_REVISION`; its first connection is the store's probe (an unreachable store fails here)."""
    with engine.connect() as conn:
        if stored_revision(conn) == HEAD_REVISION:
            return
    _racing_other_openers(lambda: _migrate(engine))


def alembic_config(conn: Connection | None = None) -> Config:
    """Alembic's configuration of the store's migrations, without a file: the scripts found beside this module
    (wherever the package is installed), `env.py` running them on `conn`."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPTS).replace("%", "%%"))
    config.attributes["connection"] = conn
    return config


def _migrate(engine: Engine) -> None:
    with engine.connect() as conn:
        _lock(conn)
        revision = stored_revision(conn)
        if revision is None and not set(inspect(conn).get_table_names()) & set(metadata.tables):
            _create(conn)
        elif revision != HEAD_REVISION:
            _upgrade(conn, revision, engine)
        conn.commit()


def _create(conn: Connection) -> None:
    """A new store: today's tables, and the version table saying so."""
    metadata.create_all(conn)
    version.create(conn, checkfirst=True)  # an empty one stays after Alembic's downgrade to base
    conn.execute(insert(version).values(version_num=HEAD_REVISION))


def _upgrade(conn: Connection, revision: str | None, engine: Engine) -> None:
    """Alembic's upgrade of a store written by an earlier version, on the locked connection."""
    from alembic import command  # half a second to import: only a store to upgrade needs it

    config = alembic_config(conn)
    if revision is not None:
        _known(config, revision, engine)
    command.upgrade(config, HEAD_REVISION)
    url = engine.url.render_as_string(hide_password=True)
    log.info("checkpoint store %s: schema upgraded from %s to %s", url, revision or "unversioned", HEAD_REVISION)


def _lock(conn: Connection) -> None:
    """The store's migration lock, held until the transaction ends; other openers wait for it."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})


def _known(config: Config, revision: str, engine: Engine) -> None:
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        ScriptDirectory.from_config(config).get_revision(revision)
    except CommandError:
        raise StoreError(
            f"checkpoint store at {engine.url.render_as_string(hide_password=True)} has schema revision {revision!r}, "
            f"which this version of elasticity does not know (its newest is {HEAD_REVISION!r}): a newer version "
            "upgraded it; open it with that version or a later one"
        ) from None


def _racing_other_openers(create: Callable[[], None]) -> None:
    """Runs a schema step that checks, then creates. Processes opening a new store at once (the triggers of
    several jobs, a DAG run beside the job page) wait for each other on the migration lock; a process of a
    version before the lock may still create a table between this one's check and its create, and the loser's
    error ("already exists", a duplicate in PostgreSQL's catalog) means the other made it: look again."""
    Retrying(
        retry=retry_if_exception(_made_by_another),
        stop=stop_after_attempt(SCHEMA_ATTEMPTS),
        wait=wait_incrementing(start=0.02, increment=0.02),
        reraise=True,
    )(create)


def _made_by_another(e: BaseException) -> bool:
    return isinstance(e, DBAPIError) and any(m in str(e.orig or e).lower() for m in ("already exists", "duplicate"))
