"""The job coordinator: JobModel generations and their checkpoints, as Samza's
JobCoordinator does, plus the rescale that moves a job from one factor to another.

It composes pure parts (grouping, migration) with the store and the inputs'
metadata (partition counts, start offsets), which it gets through `Inputs`, so
that the same code runs on Kafka and on the in-memory stream of the tests.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from elasticity import faults
from elasticity.batch.coordinator.lease import held_lease
from elasticity.batch.sinks.exactly_once import settle
from elasticity.checkpoint.migration import Migration, migrate
from elasticity.checkpoint.store import CheckpointStore, Generation, StaleGenerationError, StoreError, SupersededError
from elasticity.checkpoint.store.attempt_token import attempt_owner
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.checkpoint.task_ownership import check_changelog_partition, check_owned
from elasticity.config import ConfigError, JobConfig
from elasticity.config.runtime_rules import rescale_factor
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import JobModel, SystemStream, SystemStreamPartition, TaskName
from elasticity.jobmodel.tasknames import parse_task_name
from elasticity.kafka.admin import client_settings
from elasticity.metrics.job_metrics import RescaleMetrics, record_rescale
from elasticity.metrics.reporters import Reporters

if TYPE_CHECKING:
    from elasticity.api import StoreDescriptor
    from elasticity.state import StorageConfig
    from elasticity.state.state_move import StateMove

log = logging.getLogger(__name__)

__all__ = ["Inputs", "JobCoordinator", "RescalePlan"]


class Inputs(Protocol):
    def partition_counts(self, streams: Iterable[SystemStream]) -> dict[SystemStream, int]: ...

    def offsets(self, ssps: Iterable[SystemStreamPartition], which: str) -> dict[SystemStreamPartition, int]: ...


def default_owner() -> str:
    """This process's attempt: host and pid, and a random part (`attempt_token`)."""
    return attempt_owner(f"{socket.gethostname()}:{os.getpid()}")


Cause = tuple[str | None, str, str | None]  # a rescale's (trigger, origin, the autosizer's decision as JSON)


@dataclass(frozen=True, kw_only=True)
class RescalePlan:
    old: Generation | None
    model: JobModel
    factor: int
    migration: Migration | None  # None when the job already runs this model
    state: StateMove | None = None  # the stores' move (counted only, in a dry run); None for a stateless app
    metrics: Mapping[str, int] = field(default_factory=dict)  # job-model-generation-ns, checkpoint-compute-ns, state-move-ns

    @property
    def changes_nothing(self) -> bool:
        return self.migration is None


class JobCoordinator:
    def __init__(self, config: JobConfig, store: CheckpointStore, inputs: Inputs, reporters: Reporters | None = None) -> None:
        self.config = config
        self.store = store
        self.inputs = inputs
        self.job = config.job_name
        self.reporters = reporters if reporters is not None else Reporters.of(config)

    def current(self) -> Generation | None:
        return self.store.generation(self.job)

    def warn_unread_factor(self, generation: Generation) -> None:
        """Once a job has a generation its factor is the generation's (SEP-32's rescale moves it), so a config
        naming another factor is not read: a batch says so in its log, lest a new value seem to have been taken.
        Quiet when a scale policy chooses the factor (job.elasticity.schedule or .autosize): it differs by design."""
        configured = self.config.elasticity_factor
        if configured == generation.factor or self.config.elasticity_schedule or self.config.autosize:
            return
        log.warning(
            "job %r: job.elasticity.factor=%d is not read: the job runs at factor %d (generation %d), and the key sets "
            "only a new job's factor. To run at %d, rescale: the elastic_rescale DAG, or `elasticity rescale --config "
            "<the job's file> --factor %d`; or set the key to %d to say what runs",
            self.job,
            configured,
            generation.factor,
            generation.number,
            configured,
            configured,
            generation.factor,
        )

    def checkpoints(self, generation: Generation) -> dict[TaskName, TaskCheckpoint]:
        """Every task's checkpoint; a task without one, or an input partition missing from its task's, is an
        error, never a silent restart or skip."""
        found = self.store.checkpoints(
            self.job, generation.number, self.config.checkpoint_read_versions, self.config.live_checkpoint_max_age_ms
        )
        missing = sorted(t.task_name.name for t in generation.job_model.tasks() if t.task_name not in found)
        if missing:
            raise StoreError(
                f"job {self.job!r} generation {generation.number}: no checkpoint of version "
                f"{','.join(map(str, self.config.checkpoint_read_versions))} (task.checkpoint.read.versions) for "
                f"{len(missing)} tasks, e.g. {missing[:3]}"
            )
        uncovered = sorted(
            f"{t.task_name.name}: {s}"
            for t in generation.job_model.tasks()
            for s in t.system_stream_partitions
            if s not in found[t.task_name].offsets
        )
        if uncovered:
            raise StoreError(
                f"job {self.job!r} generation {generation.number}: {len(uncovered)} input partitions without an offset in "
                f"their task's checkpoint, e.g. {uncovered[:3]}; each holds every partition its task reads (these rows were "
                "written or cut short outside the product): write them whole with checkpoint-tool write before running on"
            )
        return found

    def _model(self, factor: int) -> JobModel:
        config = self.config.with_overrides({"job.elasticity.factor": str(factor)})
        return build_job_model(config, self.inputs.partition_counts(config.inputs))

    def _new_ssp_offsets(
        self, old: Mapping[TaskName, TaskCheckpoint], model: JobModel, *, first: bool
    ) -> dict[SystemStreamPartition, int]:
        """Start offsets of the input partitions that no old checkpoint covers.

        `offset.default` applies to the job's first generation only. A partition
        added later starts at its oldest available offset, as Spark's Kafka source
        and Flink read newly discovered partitions: its records were written after
        the job started, and starting at its end would skip them silently.
        """
        known = {s.without_key_bucket() for cp in old.values() for s in cp.offsets}
        new = {s.without_key_bucket() for t in model.tasks() for s in t.system_stream_partitions} - known
        out: dict[SystemStreamPartition, int] = {}
        for system in {s.system for s in new}:
            group = [s for s in new if s.system == system]
            out.update(self.inputs.offsets(group, self.config.offset_default(system) if first else "oldest"))
        return out

    def _target(self, factor: int | None) -> tuple[Generation | None, int, JobModel]:
        old = self.current()
        if factor is None:
            factor = old.factor if old else self.config.elasticity_factor
        return old, rescale_factor(factor), self._model(factor)

    @cached_property
    def storage(self) -> tuple[StorageConfig, list[StoreDescriptor]] | None:
        """The app's stores as the job configures them; None for a stateless app."""
        from elasticity.api.stream import load_application
        from elasticity.state import StorageConfig

        descriptors = list(load_application(self.config.app_class, self.config.inputs).stores.values())
        return (StorageConfig.of(self.config, descriptors), descriptors) if descriptors else None

    def _move_state(
        self,
        old: Generation,
        old_cps: Mapping[TaskName, TaskCheckpoint],
        factor: int,
        *,
        model: JobModel,
        dry_run: bool,
        epoch: int | None = None,
    ) -> StateMove | None:
        """Every store's entries to the new task of their key's bucket: see state/rescale.py."""
        from elasticity.state.rescale import move_state

        if self.storage is None:
            return None
        config, descriptors = self.storage
        return move_state(
            config,
            descriptors,
            old.job_model,
            old_factor=old.factor,
            from_generation=old.number,
            old_cps=old_cps,
            new_model=model,
            new_factor=factor,
            dry_run=dry_run,
            epoch=epoch,
        )

    def _migrate(
        self, old: Generation | None, old_cps: Mapping[TaskName, TaskCheckpoint], factor: int, model: JobModel
    ) -> Migration:
        return migrate(
            old.factor if old else 1,
            old_cps.values(),
            model,
            new_factor=factor,
            new_ssp_offsets=self._new_ssp_offsets(old_cps, model, first=old is None),
        )

    @staticmethod
    def _unchanged(old: Generation | None, factor: int, model: JobModel) -> bool:
        return old is not None and old.factor == factor and old.job_model.tasks() == model.tasks()

    def plan_rescale(self, factor: int | None = None, *, state: bool = True) -> RescalePlan:
        """What a rescale would do, computed from the current checkpoints (no lock, no write). `state`: the
        stores' snapshots are downloaded and scanned to count what each new task would receive, a cost that
        grows with the state; without it the plan reads the checkpoints only and `state` stays None."""
        t = time.perf_counter_ns()
        old, factor, model = self._target(factor)
        metrics = {"job-model-generation-ns": time.perf_counter_ns() - t}
        if self._unchanged(old, factor, model):
            return RescalePlan(old=old, model=model, factor=factor, migration=None, metrics=metrics)
        old_cps = self.checkpoints(old) if old else {}
        t = time.perf_counter_ns()
        migration = self._migrate(old, old_cps, factor, model)
        metrics["checkpoint-compute-ns"] = time.perf_counter_ns() - t
        move = self._move_state(old, old_cps, factor, model=model, dry_run=True) if old and state else None
        if move is not None:
            metrics["state-move-ns"] = move.state_move_ns
        return RescalePlan(old=old, model=model, factor=factor, migration=migration, state=move, metrics=metrics)

    def rescale(
        self,
        factor: int | None = None,
        owner: str | None = None,
        *,
        abandon_pending: bool = False,
        trigger: str | None = None,
        origin: str = "manual",
        settled: bool = False,
        expected_generation: int | None = None,
        decision: str | None = None,
    ) -> RescalePlan:
        """Move the job to `factor` (default: the current one, picking up new partitions) under the lease.

        Either the whole new generation is written, or nothing: the store holds
        the old or the new generation, never a mix. The stores' new snapshots are
        uploaded first; the generation names them only once all are durable, and
        a crash before leaves the old generation as it was (a rerun removes what
        the crashed attempt uploaded).

        With exactly-once Kafka outputs it first settles what earlier runs left (`exactly_once.settle`), also
        under the owner of a run that died holding the lease: a pending batch whose Kafka transaction committed
        is rolled forward, never abandoned and read again. `settled`: the caller is a run that settled at its
        start, and whose own transactional.id must stay open. `expected_generation`: the generation the caller
        decided on (a schedule's, an autosizer's); if the job has moved on since (a person's rescale), nothing
        changes (StaleGenerationError). `decision`: the autosizer's record (JSON), kept with the generation.
        """
        owner = owner or default_owner()

        def leased() -> RescalePlan:
            faults.point("rescale.lease_acquired")
            if not settled and self.config.processing_guarantee == "exactly_once":
                self._settle(owner)
            cause = (trigger, origin, decision)
            return self._rescale_leased(factor, owner, abandon_pending=abandon_pending, cause=cause, expected=expected_generation)

        if self.store.holds_lease(self.job, owner):  # a batch refreshing its model: its heartbeat keeps the lease
            self.store.acquire_lease(self.job, owner, self.config.lease_ttl_ms)
            return leased()
        with held_lease(self.store, self.job, owner, self.config.lease_ttl_ms):  # renewed through a long state move
            return leased()

    def _settle(self, owner: str) -> None:
        """No transaction of the old generation stays open, and what one committed is in the store."""
        settle(
            self.job,
            self.config.job_id,
            self.store,
            kafka_for=lambda system: client_settings(self.config, system, "producer"),
            write_versions=self.config.checkpoint_write_versions,
            owner=owner,
        )

    def _rescale_leased(
        self, factor: int | None, owner: str, *, abandon_pending: bool, cause: Cause, expected: int | None
    ) -> RescalePlan:
        """`rescale`'s steps under the held lease: the target, the state's move, the new generation written with
        the migrated checkpoints, then the move finished and the rescale's metrics recorded. `cause`: (trigger,
        origin, decision) as `rescale` has them."""
        trigger, origin, decision = cause
        t = time.perf_counter_ns()
        old, factor, model = self._target(factor)
        if expected is not None and (old.number if old else 0) != expected:
            raise StaleGenerationError(
                f"job {self.job!r}: the rescale to {factor} was decided on generation {expected}, but the job is at "
                f"generation {old.number if old else 0} (rescaled since); nothing was changed"
            )
        metrics = {"job-model-generation-ns": time.perf_counter_ns() - t}
        epoch = self.store.held_epoch(self.job, owner)
        if old is not None and self.storage is not None:
            from elasticity.state.state_move import clean_stale_moves

            # what a crashed or superseded move left; never a later attempt's, and only while the lease is ours
            clean_stale_moves(self.storage[0], old.number, epoch=epoch, check=lambda: self.store.check_lease(self.job, owner))
        if self._unchanged(old, factor, model):
            return RescalePlan(old=old, model=model, factor=factor, migration=None, metrics=metrics)
        done: list[Migration] = []
        # the stores move from the checkpoints as read now (a stateless app's are read once, under the lock)
        moved_from = self.checkpoints(old) if old and self.storage is not None else {}
        move = self._move_state(old, moved_from, factor, model=model, dry_run=False, epoch=epoch) if old else None

        def compute(old_cps: dict[TaskName, TaskCheckpoint]) -> Mapping[TaskName, TaskCheckpoint]:
            # from the checkpoints the transaction reads under the row lock
            t = time.perf_counter_ns()
            if move is not None and _committed_state(old_cps) != _committed_state(moved_from):
                raise StoreError(
                    f"job {self.job!r}: a checkpoint was written while the state moved; nothing was changed, rerun the rescale"
                )
            done.append(self._migrate(old, old_cps, factor, model))
            new = move.apply(done[-1].checkpoints) if move is not None else done[-1].checkpoints
            metrics["checkpoint-compute-ns"] = time.perf_counter_ns() - t
            return new

        reason = f"rescale {old.factor} -> {factor}" if old else f"first generation at factor {factor}"
        try:
            new = self._write_generation(
                old,
                factor,
                model,
                compute=compute,
                owner=owner,
                reason=f"{reason} ({trigger or 'by ' + owner})",
                abandon_pending=abandon_pending,
                origin=origin if old else "start",
                decision=decision if old else None,
            )
        except SupersededError:
            if move is not None and self.storage is not None:  # refused for good: its uploads go, also those its
                from elasticity.state.state_move import discard  # successor's cleanup could not see yet

                discard(self.storage[0], move)
            raise
        self._finish_rescale(old, new, move, metrics)
        return RescalePlan(old=old, model=model, factor=factor, migration=done[-1], state=move, metrics=metrics)

    def _finish_rescale(self, old: Generation | None, new: Generation, move: StateMove | None, metrics: dict[str, int]) -> None:
        """After the new generation is written: the state's move finished, the rescale's metrics recorded and logged."""
        if move is not None:
            from elasticity.state.state_move import finish

            faults.point("rescale.state.committed")
            assert self.storage is not None
            finish(self.storage[0], move)
            metrics["state-move-ns"] = move.state_move_ns
        self._record_rescale(old, new, metrics)
        log.info(
            "job %r: %s -> factor %d: %s",
            self.job,
            f"factor {old.factor}" if old else "new job",
            new.factor,
            " ".join(f"{k}={v}" for k, v in metrics.items()),
        )

    def _record_rescale(self, old: Generation | None, new: Generation, metrics: dict[str, int]) -> None:
        """SEP-32's rescale metrics: job-model-generation-ns and checkpoint-compute-ns (and state-move-ns)."""
        record_rescale(
            self.store,
            self.reporters,
            RescaleMetrics(
                job=self.job,
                generation=new.number,
                old_factor=old.factor if old else None,
                factor=new.factor,
                origin=new.origin,
                task_count=len(new.job_model.tasks()),
                job_model_generation_ns=metrics["job-model-generation-ns"],
                checkpoint_compute_ns=metrics["checkpoint-compute-ns"],
                state_move_ns=metrics.get("state-move-ns"),
            ),
        )

    def _write_generation(
        self,
        old: Generation | None,
        factor: int,
        model: JobModel,
        *,
        compute: Callable[[dict[TaskName, TaskCheckpoint]], Mapping[TaskName, TaskCheckpoint]],
        owner: str,
        reason: str,
        abandon_pending: bool = False,
        origin: str = "manual",
        decision: str | None = None,
    ) -> Generation:
        """The next generation (the first when `old` is None); the caller holds the lease."""
        return self.store.write_generation(
            self.job,
            old.number if old else 0,
            factor,
            model=model,
            compute=compute,
            owner=owner,
            reason=reason,
            write_versions=self.config.checkpoint_write_versions,
            read_versions=self.config.checkpoint_read_versions,
            live_max_age_ms=self.config.live_checkpoint_max_age_ms,
            abandon_pending=abandon_pending,
            origin=origin,
            decision=decision,
        )

    def adopt(self, imported: Iterable[TaskCheckpoint], source: str, owner: str | None = None) -> RescalePlan:
        """A new generation (the job's first, or the next one under the lease) that resumes from
        checkpoints written elsewhere, e.g. by a Samza job.

        The factor is the one the task names carry (`Partition 3` = 1, `Partition_3-1-4` = 4); every
        task must be one of the job model at that factor and read only its own SSPs. Input
        partitions the import does not cover start as new partitions do.
        """
        by_task = {cp.task_name: cp for cp in imported}
        if not by_task:
            raise StoreError(f"no checkpoints for job {self.job!r} in {source}")
        factors = {parse_task_name(t).factor for t in by_task}
        if len(factors) != 1:
            raise ConfigError(f"checkpoints in {source} mix elasticity factors {sorted(factors)}; expected one")
        (factor,) = factors
        owner = owner or default_owner()
        self.store.acquire_lease(self.job, owner, self.config.lease_ttl_ms)
        try:
            old = self.current()
            model = self._model(factor)
            for cp in by_task.values():
                check_owned(model, cp, f"factor {factor}")
                check_changelog_partition(model, cp, source)
            migration = migrate(
                factor,
                by_task.values(),
                model,
                new_factor=factor,
                new_ssp_offsets=self._new_ssp_offsets(by_task, model, first=old is None),
            )
            # same factor, same tasks: each keeps the state it committed (its stores restore from these markers)
            checkpoints = {
                t: replace(cp, checkpoint_id=by_task[t].checkpoint_id, state_markers=by_task[t].state_markers)
                if t in by_task
                else cp
                for t, cp in migration.checkpoints.items()
            }
            reason = f"imported from {source} at factor {factor} (by {owner})"
            self._write_generation(old, factor, model, compute=lambda _old: checkpoints, owner=owner, reason=reason)
            return RescalePlan(old=old, model=model, factor=factor, migration=migration)
        finally:
            self.store.release_lease(self.job, owner)

    def initialize(self, owner: str | None = None, *, settled: bool = False) -> Generation:
        """The current generation, creating the first one from the config if the job is new,
        or a new one at the same factor when input partitions were added (`settled`: as `rescale`'s)."""
        current = self.current()
        if current is None:
            self.rescale(self.config.elasticity_factor, owner, settled=settled)
        else:
            counts = self.inputs.partition_counts(self.config.inputs)
            known = {s.without_key_bucket() for t in current.job_model.tasks() for s in t.system_stream_partitions}
            wanted = {SystemStreamPartition(ss.system, ss.stream, p) for ss, n in counts.items() for p in range(n)}
            if wanted != known:
                plan = self.rescale(
                    current.factor,
                    owner,
                    trigger=f"new input partitions {sorted(map(str, wanted - known))}",
                    origin="partitions",
                    settled=settled,
                )
                if plan.migration is not None and plan.migration.new_ssps:
                    log.info("job %r: %s", self.job, plan.migration.describe_new_ssps())
        current = self.current()
        assert current is not None
        return current

    def replace_checkpoints(self, task_checkpoints: Iterable[TaskCheckpoint], owner: str | None = None) -> Generation:
        """Overwrite checkpoints of the current generation (the job is created first when new)."""
        owner = owner or default_owner()
        generation = self.initialize(owner)
        task_checkpoints = list(task_checkpoints)
        for cp in task_checkpoints:
            check_owned(generation.job_model, cp, f"generation {generation.number} (factor {generation.factor})")
        self.store.acquire_lease(self.job, owner, self.config.lease_ttl_ms)
        try:
            self.store.replace_checkpoints(
                self.job, generation.number, task_checkpoints, write_versions=self.config.checkpoint_write_versions, owner=owner
            )
        finally:
            self.store.release_lease(self.job, owner)
        return generation


def _committed_state(cps: Mapping[TaskName, TaskCheckpoint]) -> dict[TaskName, tuple]:
    """What a state move read: offsets, watermarks and the state each checkpoint commits."""
    return {t: (cp, cp.checkpoint_id, {f: dict(m) for f, m in cp.state_markers.items()}) for t, cp in cps.items()}
