"""The keys of state: stores, their backup and restore backends, the commit and restore pools (read by
`elasticity.state.store_config`). Part of `JobConfig`."""

from __future__ import annotations

from dataclasses import dataclass

from elasticity.config.keys import (
    SAME_AS_SAMZA,
    key,
)
from elasticity.config.parsers import (
    flag,
    int_range,
    nonempty,
    parse_factories,
)


@dataclass(frozen=True, kw_only=True)
class StateKeys:
    """State: stores and their backends."""

    backup_factories: tuple[str, ...] | None = key(
        "stores.backup.factories",
        parse_factories,
        None,
        doc="Backup backends of every store without its own list (default: the Kafka changelog when the store has one).",
        samza=SAME_AS_SAMZA,
    )
    restore_factories: tuple[str, ...] | None = key(
        "stores.restore.factories",
        parse_factories,
        None,
        doc="Restore backends of every store without its own list (default: the Kafka changelog when the store has one, else the store's backup factories).",
        samza=SAME_AS_SAMZA,
    )
    changelog_system: str | None = key(
        "job.changelog.system",
        nonempty,
        None,
        doc="System of a store changelog given as a bare stream (stores.<store>.changelog=<stream>); default job.default.system.",
        samza=SAME_AS_SAMZA,
    )
    blob_store_uri: str | None = key(
        "blob.store.uri",
        nonempty,
        None,
        doc="Where blob-store snapshots go: a folder or a pyarrow/fsspec URI such as s3://bucket/prefix (default $ELASTICITY_HOME/<job>/blobs).",
    )
    transactional_state: bool = key(
        "task.transactional.state.checkpoint.enabled",
        flag,
        "true",
        doc="true: a restore yields exactly the last checkpoint's state; false: Samza's non-transactional state (local store reused as it is, changelog replayed to its end).",
        samza=SAME_AS_SAMZA,
    )
    job_state_dir: str | None = key(
        "job.state.dir",
        nonempty,
        None,
        doc="Folder of the local RocksDB stores, one per virtual task and store (default $ELASTICITY_HOME/<job>/state).",
        samza="Samza's job.logged.store.base.dir and job.non-logged.store.base.dir",
    )
    commit_pool_size: int = key(
        "job.container.commit.thread.pool.size",
        int_range(1, 1024),
        "2",
        doc="Threads uploading a container's state snapshots, at least: Samza's min(max(2 x tasks, this), the max size).",
        samza=SAME_AS_SAMZA,
    )
    commit_pool_max_size: int = key(
        "job.container.commit.thread.pool.max.size",
        int_range(1, 1024),
        "64",
        doc="Most threads uploading a container's state snapshots.",
        samza=SAME_AS_SAMZA,
    )
    restore_pool_size: int = key(
        "job.container.restore.thread.pool.size",
        int_range(1, 1024),
        "2",
        doc="Threads restoring a container's stores, at least: Samza's min(max(2 x tasks x restore backends, this), the max size).",
        samza=SAME_AS_SAMZA,
    )
    restore_pool_max_size: int = key(
        "job.container.restore.thread.pool.max.size",
        int_range(1, 1024),
        "64",
        doc="Most threads restoring a container's stores.",
        samza=SAME_AS_SAMZA,
    )
