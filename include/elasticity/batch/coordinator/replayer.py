"""A replay as the job coordinator applies it: a new generation (origin `replay`, the same factor and job
model) whose virtual tasks start each input partition where Kafka's ListOffsets puts the requested time (or at
the log start), its stores cleared, written under the job's lease and fenced as a rescale is, so no batch of
the old generation runs meanwhile or commits after it.

Steps: take the lease (a running batch may finish first) - settle exactly-once outputs as a rescale does -
resolve the starts - refuse, nothing changed, when the stores cannot be rebuilt from the retained input
(`state.replay_state.refusals`) - clear the stores (journalled uploads) - write the generation with its `Replay`
record in one fenced transaction - with `--outputs replace`, remove the replayed range's rows of the older
versions from the Parquet outputs (`batch.sinks.replay_outputs`) - record it like a rescale.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from elasticity import faults
from elasticity.batch.coordinator.job_coordinator import JobCoordinator, default_owner
from elasticity.batch.coordinator.lease import held_lease
from elasticity.checkpoint.replay import (
    OutputMode,
    PartitionStart,
    Replay,
    ReplayError,
    ReplayFrom,
    choose_starts,
    replay_checkpoints,
)
from elasticity.checkpoint.store import Generation, StoreError, SupersededError
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.jobmodel.model import SystemStreamPartition, TaskName

if TYPE_CHECKING:
    from elasticity.state.state_move import StateMove

log = logging.getLogger(__name__)

__all__ = ["ReplayPlan", "plan_replay", "replay"]


@dataclass(frozen=True, kw_only=True)
class ReplayPlan:
    """What a replay does (or did): the generation it replaces and writes, where each partition starts, the
    stores it clears, and why it is refused (`refused`: nothing was or would be changed)."""

    job: str
    requested: ReplayFrom
    outputs: OutputMode
    old: Generation
    starts: Mapping[SystemStreamPartition, PartitionStart]
    checkpoints: Mapping[TaskName, TaskCheckpoint]
    stores: tuple[str, ...]
    refused: tuple[str, ...] = ()
    new: Generation | None = None
    removed_rows: int = 0  # --outputs replace: the older versions' rows of the replayed range removed
    metrics: Mapping[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        verb = "replays" if self.new is not None else "would replay"
        lines = [
            f"job {self.job!r} {verb} from {self.requested.describe()} at factor {self.old.factor} "
            f"(generation {self.old.number} -> {self.new.number if self.new else self.old.number + 1}), outputs: {self.outputs}"
        ]
        lines += [f"  {s.describe()}" for s in self.starts.values()]
        if self.stores:
            lines.append(f"  stores cleared and rebuilt from the replayed records: {', '.join(self.stores)}")
        if self.outputs == OutputMode.REPLACE and self.new is not None:
            lines.append(f"  outputs: {self.removed_rows} rows of the replayed range removed from the older versions")
        lines += [f"  refused: {r}" for r in self.refused]
        return "\n".join(lines)


def _starts(coordinator: JobCoordinator, old: Generation, frm: ReplayFrom) -> dict[SystemStreamPartition, PartitionStart]:
    """Each input partition's start: ListOffsets by the time (offsets_for_time), within the log's bounds."""
    ssps = sorted({s.without_key_bucket() for t in old.job_model.tasks() for s in t.system_stream_partitions})
    bounds = getattr(coordinator.inputs, "bounds", None)
    if bounds is None:
        log_starts, log_ends = coordinator.inputs.offsets(ssps, "oldest"), coordinator.inputs.offsets(ssps, "upcoming")
    else:
        log_starts, log_ends = bounds(ssps)
    answers: dict[SystemStreamPartition, int | None] = {}
    if frm.timestamp_ms is not None:
        by_time = getattr(coordinator.inputs, "offsets_for_time", None)
        if by_time is None:
            raise ReplayError(f"the job's inputs ({type(coordinator.inputs).__name__}) cannot look offsets up by time")
        answers = by_time(ssps, frm.timestamp_ms)
    return choose_starts(frm, answers, log_starts, log_ends)


def _refusals(coordinator: JobCoordinator, starts: Mapping[SystemStreamPartition, PartitionStart]) -> list[str]:
    from elasticity.api.stream import load_application
    from elasticity.state.replay_state import refusals

    if coordinator.storage is None:
        return []
    storage, descriptors = coordinator.storage
    app = load_application(coordinator.config.app_class, coordinator.config.inputs)
    side = {name: tuple(t.side_inputs) for name, t in app.tables.items()}
    return refusals(storage, descriptors, starts=starts, side_inputs=side)


def plan_replay(coordinator: JobCoordinator, frm: ReplayFrom, outputs: OutputMode) -> ReplayPlan:
    """The dry run: where each partition would start and what would be refused; nothing written."""
    old = coordinator.current()
    if old is None:
        raise ReplayError(f"job {coordinator.job!r} has no generation yet: nothing to replay (its first batch starts it)")
    starts = _starts(coordinator, old, frm)
    cps = replay_checkpoints(old.job_model, coordinator.checkpoints(old), starts)
    stores = tuple(d.name for d in coordinator.storage[1]) if coordinator.storage else ()
    refused = tuple(_refusals(coordinator, starts))
    return ReplayPlan(
        job=coordinator.job,
        requested=frm,
        outputs=outputs,
        old=old,
        starts=starts,
        checkpoints=cps,
        stores=stores,
        refused=refused,
    )


def replay(
    coordinator: JobCoordinator,
    frm: ReplayFrom,
    *,
    outputs: OutputMode = OutputMode.NEW_VERSION,
    reason: str = "",
    owner: str | None = None,
    expected_generation: int | None = None,
) -> ReplayPlan:
    """Apply the replay under the job's lease (see the module doc); ReplayError when refused, nothing changed.
    `expected_generation`: the generation the caller saw (a form's dry run); the job moved on since: refused."""
    owner = owner or default_owner()
    config, store, job = coordinator.config, coordinator.store, coordinator.job
    with held_lease(store, job, owner, config.lease_ttl_ms):
        faults.point("replay.lease_acquired")
        if config.processing_guarantee == "exactly_once":
            coordinator._settle(owner)
        t = time.perf_counter_ns()
        plan = plan_replay(coordinator, frm, outputs)
        _check(coordinator, plan, expected_generation)
        metrics = {"job-model-generation-ns": time.perf_counter_ns() - t}
        move = _clear(coordinator, plan.old, owner)
        if move is not None:
            metrics["state-move-ns"] = move.state_move_ns
        faults.point("replay.state_cleared")
        new = _write(coordinator, plan, move, owner=owner, reason=reason or f"by {owner}", metrics=metrics)
        faults.point("replay.generation_written")
        if move is not None:
            from elasticity.state.state_move import finish

            assert coordinator.storage is not None
            finish(coordinator.storage[0], move)
        removed = 0
        if outputs == OutputMode.REPLACE:
            from elasticity.batch.sinks.replay_outputs import remove_replayed

            assert new.replay is not None
            removed = remove_replayed(config.output_dir, new, Replay.from_json(new.replay))
        coordinator._record_rescale(plan.old, new, metrics)
    log.info("job %r: replay from %s, generation %d -> %d", job, frm.describe(), plan.old.number, new.number)
    return replace(plan, new=new, removed_rows=removed, metrics=metrics)


def _check(coordinator: JobCoordinator, plan: ReplayPlan, expected_generation: int | None) -> None:
    """Refused, nothing changed: the job moved on since the caller looked, the stores cannot be rebuilt, or a
    planned batch has not committed."""
    job = coordinator.job
    if expected_generation is not None and plan.old.number != expected_generation:
        raise ReplayError(
            f"job {job!r}: the replay was asked of generation {expected_generation}, but the job is at generation "
            f"{plan.old.number} now; nothing was changed"
        )
    if plan.refused:
        why = "; ".join(plan.refused)
        raise ReplayError(f"job {job!r}: replay refused, nothing was changed: {why}")
    if (pending := coordinator.store.pending_plan(job)) is not None:
        raise ReplayError(
            f"job {job!r}: batch {pending.batch_id} was planned under generation {pending.generation} and has not "
            "committed; run it to completion first (its plan replays the same ranges), then replay; nothing was changed"
        )


def _clear(coordinator: JobCoordinator, old: Generation, owner: str) -> StateMove | None:
    """The stores cleared (`state.replay_state.clear_state`), after what a crashed or superseded attempt left is
    removed; None for a stateless app."""
    if coordinator.storage is None:
        return None
    from elasticity.state.replay_state import clear_state
    from elasticity.state.state_move import clean_stale_moves

    store, job = coordinator.store, coordinator.job
    storage, descriptors = coordinator.storage
    epoch = store.held_epoch(job, owner)
    clean_stale_moves(storage, old.number, epoch=epoch, check=lambda: store.check_lease(job, owner))
    return clear_state(storage, descriptors, old.job_model, factor=old.factor, from_generation=old.number, epoch=epoch)


def _write(
    coordinator: JobCoordinator, plan: ReplayPlan, move: StateMove | None, *, owner: str, reason: str, metrics: dict[str, int]
) -> Generation:
    """The replay's generation and its record, in one fenced transaction; a refused write removes the cleared
    stores' uploads."""
    config, old = coordinator.config, plan.old
    starts = {s: p.offset for s, p in plan.starts.items()}

    def compute(old_cps: dict[TaskName, TaskCheckpoint]) -> Mapping[TaskName, TaskCheckpoint]:
        t = time.perf_counter_ns()
        cps = replay_checkpoints(old.job_model, old_cps, plan.starts)
        metrics["checkpoint-compute-ns"] = time.perf_counter_ns() - t
        return move.apply(cps) if move is not None else cps

    def record(old_cps: Mapping[TaskName, TaskCheckpoint], new_cps: Mapping[TaskName, TaskCheckpoint]) -> str:
        return Replay(
            requested=plan.requested,
            reason=reason,
            outputs=plan.outputs,
            factor=old.factor,
            starts=starts,
            start_checkpoints=new_cps,
            previous_checkpoints=old_cps,
        ).to_json()

    try:
        return coordinator.store.write_generation(
            coordinator.job,
            old.number,
            old.factor,
            model=old.job_model,
            compute=compute,
            owner=owner,
            reason=f"replay from {plan.requested.describe()}, outputs as {plan.outputs} ({reason})",
            write_versions=config.checkpoint_write_versions,
            read_versions=config.checkpoint_read_versions,
            live_max_age_ms=config.live_checkpoint_max_age_ms,
            origin="replay",
            replay=record,
        )
    except (SupersededError, StoreError):
        if move is not None and coordinator.storage is not None:
            from elasticity.state.state_move import discard

            discard(coordinator.storage[0], move)
        raise
