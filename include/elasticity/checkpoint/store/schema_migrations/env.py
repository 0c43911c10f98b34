"""Alembic's environment of the checkpoint store: run by Alembic's commands, which `schema_upgrade` calls with
the store's connection in `config.attributes["connection"]`, inside the transaction that holds the store's
migration lock (so the revisions commit with it, or not at all). Imported as a module, it does nothing."""

from __future__ import annotations

from alembic import context

from elasticity.checkpoint.store.store_schema import VERSION_TABLE, metadata


def run() -> None:
    context.configure(connection=context.config.attributes["connection"], target_metadata=metadata, version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()


if hasattr(context, "config"):  # Alembic set its context up: this is a command's run
    run()
