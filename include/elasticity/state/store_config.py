"""The `stores.*` and state keys of a job, resolved per store.

Values were validated by `elasticity.config` (the single validation place);
this module applies Samza's precedence (StorageConfig): a store's own list beats
the job-level one, and without either a store with a changelog backs up to and
restores from the Kafka changelog. One deliberate difference: a store with
neither a changelog nor a restore list restores from its backup factories
(Samza would restore nothing into it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from elasticity.api.descriptors import StoreDescriptor
from elasticity.config import KAFKA_CHANGELOG_FACTORY, JobConfig, elasticity_home, parse_factories
from elasticity.config.runtime_rules import check_changelog_backend, check_declared_stores
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.clients import SystemClients
from elasticity.serializers import Serde


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    name: str
    backup_factories: tuple[str, ...]
    restore_factories: tuple[str, ...]
    changelog: SystemStream | None
    changelog_kafka: SystemClients | None  # how the changelog's clients connect
    blob_retain: int = 2
    value_serde: Serde | None = None  # stores.<store>.msg.serde: a registered serde over the app's value serde

    def descriptor(self, declared: StoreDescriptor) -> StoreDescriptor:
        """The app's declaration with the job's value serde, if it names one (Samza's `stores.<store>.msg.serde`):
        values in the store, its snapshots and its changelog are then that serde's records (a Schema Registry
        serde: Confluent's wire format, registered under the changelog topic's subject)."""
        if self.value_serde is None:
            return declared
        topic = self.changelog.stream if self.changelog is not None else declared.name
        return replace(declared, value_serde=self.value_serde, value_topic=topic)


@dataclass(frozen=True, kw_only=True)
class StorageConfig:
    job_name: str
    job_id: str
    state_dir: Path | None  # None: this host's $ELASTICITY_HOME/<job>/state (see local_state_dir)
    blob_uri: str
    stores: tuple[StoreConfig, ...]
    transactional: bool = True
    commit_pool_size: int = 2
    restore_pool_size: int = 2
    commit_timeout_ms: int = 1_800_000  # how long a reader waits for a snapshot another process is uploading
    commit_pool_max_size: int = 64
    restore_pool_max_size: int = 64

    def commit_threads(self, tasks: int) -> int:
        """Samza's SamzaContainer: min(max(2 x tasks, job.container.commit.thread.pool.size), its max size)."""
        return min(max(2 * tasks, self.commit_pool_size), self.commit_pool_max_size)

    def restore_threads(self, tasks: int) -> int:
        """Samza's ContainerStorageManager: min(max(2 x tasks x restore backends, the pool size), its max size)."""
        backends = len({f for s in self.stores for f in s.restore_factories}) or 1
        return min(max(2 * tasks * backends, self.restore_pool_size), self.restore_pool_max_size)

    def local_state_dir(self) -> Path:
        return local_state_dir(self.state_dir, self.job_name)

    def store(self, name: str) -> StoreConfig:
        for s in self.stores:
            if s.name == name:
                return s
        raise KeyError(f"no store {name!r} (declared: {sorted(s.name for s in self.stores)})")

    @classmethod
    def of(cls, config: JobConfig, descriptors: Sequence[StoreDescriptor]) -> StorageConfig:
        """The stores an app declares, configured by the job; a key naming an undeclared store fails."""
        check_declared_stores(config, {d.name for d in descriptors})
        return cls(
            job_name=config.job_name,
            job_id=config.job_id,
            state_dir=state_dir(config),
            blob_uri=config.blob_store_uri or str(elasticity_home() / config.job_name / "blobs"),
            stores=tuple(_store_config(config, d.name) for d in descriptors),
            transactional=config.transactional_state,
            commit_pool_size=config.commit_pool_size,
            restore_pool_size=config.restore_pool_size,
            commit_timeout_ms=config.commit_timeout_ms,
            commit_pool_max_size=config.commit_pool_max_size,
            restore_pool_max_size=config.restore_pool_max_size,
        )


def _store_config(config: JobConfig, name: str) -> StoreConfig:
    """One store's backends: its own keys, else the job-wide ones, else the changelog's (Samza's defaults)."""
    from elasticity.kafka.admin import system_clients

    raw = config.raw_map

    def listed(key: str) -> tuple[str, ...] | None:
        return parse_factories(raw[key]) if key in raw else None

    pre = f"stores.{name}."
    changelog = config.changelog(name)
    by_changelog: tuple[str, ...] = (KAFKA_CHANGELOG_FACTORY,) if changelog else ()
    backup = listed(pre + "backup.factories")
    if backup is None:
        backup = listed("stores.backup.factories") or by_changelog
    restore = listed(pre + "restore.factories")
    if restore is None:
        restore = listed(pre + "restore.factory")
    if restore is None:
        restore = listed("stores.restore.factories") or by_changelog or backup
    check_changelog_backend(name, backup + restore, changelog)
    return StoreConfig(
        name=name,
        backup_factories=backup,
        restore_factories=restore,
        changelog=changelog,
        changelog_kafka=system_clients(config, changelog.system) if changelog else None,
        blob_retain=config.value(pre + "blob.retain"),
        value_serde=config.registered_serde(config.value(pre + "msg.serde")) if config.get(pre + "msg.serde") else None,
    )


def state_dir(config: JobConfig) -> Path | None:
    """`job.state.dir` as configured, or None for the default, which each host resolves for itself."""
    return Path(config.job_state_dir) if config.job_state_dir else None


def local_state_dir(configured: Path | str | None, job_name: str) -> Path:
    """The stores' and the tables' local folders: `job.state.dir`, default `$ELASTICITY_HOME/<job>/state` of
    the host they open on (resolved there, not on the driver: on a cluster, each executor's own disk)."""
    return Path(configured) if configured else elasticity_home() / job_name / "state"
