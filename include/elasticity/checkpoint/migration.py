"""Checkpoint migration when the elasticity factor changes: pure, per SSP.

Old bucket a (factor F) and new bucket b (factor G) share keys iff
a = b (mod gcd(F, G)), because both are the same hash taken mod F and mod G.
A new bucket starts at the min offset of the old buckets it shares keys with,
so nothing is lost. Every old bucket that was further ahead leaves a
`Watermark(F, a, offset)`: the records of class a mod F below that offset are
already done and are skipped, so nothing is processed twice. Split (G = kF)
degenerates to SEP-32's "children inherit the parent's offset"; merge and any
other change keep exactly-once where SEP-32 accepted duplicates.

Watermarks inherited from earlier rescales travel along while they still
matter, and collapse into the offset as soon as they cover the whole bucket or
the offset passes them, so their number per task and SSP stays below the sum of
the distinct factors in play.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import gcd

from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.jobmodel.model import NO_KEY_BUCKET, JobModel, SystemStreamPartition, TaskName


class MigrationError(ValueError):
    pass


@dataclass(frozen=True)
class BucketState:
    """One bucket of one SSP: next offset and the watermarks that apply to it."""

    offset: int
    watermarks: tuple[Watermark, ...] = ()


def _bucket_index(ssp: SystemStreamPartition) -> int:
    return 0 if ssp.key_bucket == NO_KEY_BUCKET else ssp.key_bucket


def _bucket_ssp(base: SystemStreamPartition, bucket: int, factor: int) -> SystemStreamPartition:
    return base.with_key_bucket(bucket if factor > 1 else NO_KEY_BUCKET)


def _intersects(w: Watermark, factor: int, bucket: int) -> bool:
    return (w.bucket - bucket) % gcd(w.factor, factor) == 0


def normalise(state: BucketState, factor: int, bucket: int) -> BucketState:
    """Drop what the offset has passed; lift the offset over watermarks that cover the whole bucket.

    Watermarks of one finer factor f (a multiple of `factor`) cover the bucket
    together when all f/factor of its sub-classes are present: everything below
    the smallest of them is done.
    """
    offset = state.offset
    best: dict[tuple[int, int], int] = {}
    for w in state.watermarks:
        if _intersects(w, factor, bucket):
            key = (w.factor, w.bucket)
            best[key] = max(best.get(key, 0), w.offset)
    while True:
        live = {k: o for k, o in best.items() if o > offset}
        lifted = offset
        by_factor: dict[int, dict[int, int]] = defaultdict(dict)
        for (f, r), o in live.items():
            if factor % f == 0 and bucket % f == r:  # class (f, r) contains the whole bucket
                lifted = max(lifted, o)
            elif f % factor == 0:
                by_factor[f][r] = o
        for f, residues in by_factor.items():
            if len(residues) == f // factor:  # every sub-class of the bucket is present
                lifted = max(lifted, min(residues.values()))
        if lifted == offset:
            return BucketState(offset, tuple(sorted(Watermark(f, r, o) for (f, r), o in live.items())))
        offset = lifted


def _sharing(old_factor: int, g: int) -> list[list[int]]:
    """Per residue mod g, the old buckets of that residue: those a new bucket of the residue shares keys with."""
    return [[a for a in range(r, old_factor, g)] for r in range(g)]


def migrate_ssp(old: Mapping[int, BucketState], old_factor: int, new_factor: int) -> dict[int, BucketState]:
    """The buckets of one SSP at `new_factor`, from its buckets at `old_factor`."""
    if sorted(old) != list(range(old_factor)):
        raise MigrationError(f"expected checkpoints for buckets 0..{old_factor - 1}, found {sorted(old)}")
    g = gcd(old_factor, new_factor)
    shared = _sharing(old_factor, g)
    new = {}
    for b in range(new_factor):
        sources = shared[b % g]
        start = min(old[a].offset for a in sources)
        marks = [Watermark(old_factor, a, old[a].offset) for a in sources if old[a].offset > start]
        marks += [w for a in sources for w in old[a].watermarks]
        new[b] = normalise(BucketState(start, tuple(marks)), new_factor, b)
    return new


@dataclass(frozen=True, kw_only=True)
class Move:
    """One line of the migration plan: where a new task's start on an SSP comes from."""

    new_task: TaskName
    ssp: SystemStreamPartition
    offset: int
    watermarks: tuple[Watermark, ...]
    old_tasks: tuple[TaskName, ...]


@dataclass(frozen=True, kw_only=True)
class Migration:
    old_factor: int
    new_factor: int
    checkpoints: Mapping[TaskName, TaskCheckpoint]
    moves: tuple[Move, ...]
    new_ssps: tuple[SystemStreamPartition, ...]
    dropped_ssps: tuple[SystemStreamPartition, ...]

    def describe(self) -> str:
        lines = [f"rescale: factor {self.old_factor} -> {self.new_factor}, {len(self.checkpoints)} tasks"]
        by_old: dict[tuple[TaskName, ...], list[Move]] = defaultdict(list)
        for m in self.moves:
            by_old[m.old_tasks].append(m)
        for old_tasks, moves in by_old.items():
            lines.append(" + ".join(t.name for t in old_tasks) or "(new input)")
            for m in moves:
                wm = f" skipping {', '.join(f'{w.bucket}/{w.factor}<{w.offset}' for w in m.watermarks)}" if m.watermarks else ""
                lines.append(
                    f"  -> {m.new_task.name}  {m.ssp.system}.{m.ssp.stream}.{m.ssp.partition}.{m.ssp.key_bucket} @ {m.offset}{wm}"
                )
        if self.new_ssps:
            lines.append(self.describe_new_ssps())
        for s in self.dropped_ssps:
            lines.append(f"input partition no longer read: {s.system}.{s.stream}.{s.partition}")
        return "\n".join(lines)

    def describe_new_ssps(self) -> str:
        """One line per input partition the old generation did not read, with where it starts."""
        starts = {m.ssp.without_key_bucket(): m.offset for m in self.moves}
        return "\n".join(
            f"new input partition {s.system}.{s.stream}.{s.partition} starts at offset {starts[s]}" for s in self.new_ssps
        )


def _old_buckets(
    old_checkpoints: Iterable[TaskCheckpoint],
) -> tuple[dict[SystemStreamPartition, dict[int, BucketState]], dict[SystemStreamPartition, dict[int, TaskName]]]:
    """Per input partition, each old bucket's state and the task that held it."""
    states: dict[SystemStreamPartition, dict[int, BucketState]] = defaultdict(dict)
    owners: dict[SystemStreamPartition, dict[int, TaskName]] = defaultdict(dict)
    for cp in old_checkpoints:
        for ssp, offset in cp.offsets.items():
            base, bucket = ssp.without_key_bucket(), _bucket_index(ssp)
            states[base][bucket] = BucketState(offset, cp.watermarks.get(ssp, ()))
            owners[base][bucket] = cp.task_name
    return states, owners


def migrate(
    old_factor: int,
    old_checkpoints: Iterable[TaskCheckpoint],
    new_model: JobModel,
    *,
    new_factor: int,
    new_ssp_offsets: Mapping[SystemStreamPartition, int],
) -> Migration:
    """Checkpoints of every task of `new_model`, from the old generation's.

    `new_ssp_offsets` gives the start of input partitions the old generation did
    not read (per `systems.<s>.default.stream.samza.offset.default`).
    """
    old_states, old_owner = _old_buckets(old_checkpoints)
    owner = {ssp: task.task_name for task in new_model.tasks() for ssp in task.system_stream_partitions}
    new_bases = sorted({s.without_key_bucket() for s in owner})

    offsets: dict[TaskName, dict[SystemStreamPartition, int]] = {t.task_name: {} for t in new_model.tasks()}
    marks: dict[TaskName, dict[SystemStreamPartition, tuple[Watermark, ...]]] = {t.task_name: {} for t in new_model.tasks()}
    moves, fresh = [], []
    for base in new_bases:
        if base in old_states:
            new_states = migrate_ssp(old_states[base], old_factor, new_factor)
            g = gcd(old_factor, new_factor)
            owners, shared = old_owner[base], _sharing(old_factor, g)
            sources = {b: tuple(owners[a] for a in shared[b % g]) for b in range(new_factor)}
        else:
            if base not in new_ssp_offsets:
                raise MigrationError(f"no start offset for new input partition {base.system}.{base.stream}.{base.partition}")
            new_states = {b: BucketState(new_ssp_offsets[base]) for b in range(new_factor)}
            sources = {b: () for b in range(new_factor)}
            fresh.append(base)
        for b, state in new_states.items():
            ssp = _bucket_ssp(base, b, new_factor)
            if ssp not in owner:
                raise MigrationError(f"the new job model has no task for {ssp}; is it built at factor {new_factor}?")
            name = owner[ssp]
            offsets[name][ssp] = state.offset
            if state.watermarks:
                marks[name][ssp] = state.watermarks
            old_tasks = tuple(dict.fromkeys(sources[b]))
            moves.append(Move(new_task=name, ssp=ssp, offset=state.offset, watermarks=state.watermarks, old_tasks=old_tasks))

    checkpoints = {t: TaskCheckpoint(task_name=t, offsets=offsets[t], watermarks=marks[t]) for t in offsets}
    dropped = tuple(sorted(set(old_states) - set(new_bases)))
    return Migration(
        old_factor=old_factor,
        new_factor=new_factor,
        checkpoints=checkpoints,
        moves=tuple(moves),
        new_ssps=tuple(fresh),
        dropped_ssps=dropped,
    )
