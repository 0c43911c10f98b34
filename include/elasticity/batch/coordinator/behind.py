"""Records behind: what a job has left to process, counted without reading a record. Pure.

SEP-32's offset lag (a partition's end minus each virtual task's checkpoint) counts a record once per key
bucket. The records behind count it once: per partition, its end H minus its start S (the lowest offset of
its buckets), less the records in [S, H) already processed. Those exist only while a partition's buckets are
*apart*: a bucket above S (a task that stopped early held its siblings back) or a merge's watermarks (records
of a faster old bucket, to be skipped).

Which records of [S, H) are processed depends on their keys' buckets, and only reading the records tells.
From checkpoints and high watermarks alone H - S is the tightest bound (every record above S may belong to
the slowest bucket), and a share per bucket from past batches is a guess that errs either way. The engine
counts instead: each batch reports the records its tasks kept (processed for the first time, dead letters
included), and `DoneAhead`, the processed records at or above the starts, is carried from batch to batch. It
grows by what a batch kept and shrinks by every offset a start moves over, since everything below a start is
processed. A rescale processes nothing and moves starts only up (over records below every new bucket's start),
so the count crosses it the same way; a partition it adds starts with all its buckets at one offset. When no
partition is apart, nothing above a start is processed: the count is 0 whatever came before, which anchors it.

Exact, then, from such an anchor on, where the offsets passed are all records. A transaction marker or a
compacted gap a start moves over counts as passed though no task kept it: the count falls short and the figure
errs high. Where the chain is broken (no count recorded, a start moved down, a partition dropped, checkpoints
newer than the count) the count starts again from 0; records lost from the log before they were read leave it
short by those a faster task had processed. Short of the truth from there on, it keeps the figure an upper
bound, reported as "at most": H - S at first, tighter as batches count on, exact again once no partition is
apart.

The count is the job's, not a partition's: a task's kept records may span several input streams. Per
partition H - S stays exact where its buckets are together and an upper bound where they are apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from elasticity.batch.coordinator.planning import start_offsets
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.jobmodel.object_mapper import ssp_from_key, ssp_to_key


@dataclass(frozen=True)
class DoneAhead:
    """Records at or above their partition's start already processed, all partitions together."""

    records: int
    exact: bool  # False: unknown and taken as 0, so the records behind are an upper bound
    starts: Mapping[SystemStreamPartition, int]  # the starts it is counted from


def apart(checkpoints: Iterable[TaskCheckpoint]) -> set[SystemStreamPartition]:
    """Input partitions whose buckets stand at different offsets, or carry watermarks."""
    first: dict[SystemStreamPartition, int] = {}
    out: set[SystemStreamPartition] = set()
    for cp in checkpoints:
        for ssp, offset in cp.offsets.items():
            base = ssp.without_key_bucket()
            if first.setdefault(base, offset) != offset or cp.watermarks.get(ssp):
                out.add(base)
    return out


def carried(previous: DoneAhead | None, checkpoints: Iterable[TaskCheckpoint]) -> DoneAhead:
    """The count as it stands at `checkpoints`, from `previous` (None: not known): less every offset the
    starts moved over since, all of them processed."""
    cps = list(checkpoints)
    starts = start_offsets(cps)
    if not apart(cps):
        return DoneAhead(0, True, starts)
    if previous is None or previous.starts.keys() - starts.keys():
        return DoneAhead(0, False, starts)
    moved = [starts[s] - o for s, o in previous.starts.items()]
    if any(m < 0 for m in moved):  # a start set back (a checkpoint reset): the records above it are unknown
        return DoneAhead(0, False, starts)
    return DoneAhead(max(0, previous.records - sum(moved)), previous.exact, starts)


def after_batch(before: DoneAhead, kept: int, checkpoints: Iterable[TaskCheckpoint], *, lost: bool = False) -> DoneAhead:
    """The count after a batch whose tasks kept `kept` records and committed `checkpoints`. A batch that `lost`
    records (removed from the log before they were read) passed some of them unkept, and which of those some
    faster task had processed only their keys tell: from there the count falls short, a bound."""
    return carried(DoneAhead(before.records + kept, before.exact and not lost, before.starts), checkpoints)


def behind(per_partition: Mapping[SystemStreamPartition, int], done: DoneAhead) -> int:
    """The records behind, from each partition's end minus its start: less those processed above the starts."""
    return max(0, sum(per_partition.values()) - done.records)


def summary_fields(done: DoneAhead) -> dict[str, Any]:
    """What a batch's summary records of the count (its starts are those of the offsets it commits)."""
    return {"done_ahead": done.records, "lag_left_exact": done.exact}


def recorded(summary: Mapping[str, Any] | None, checkpoints: Iterable[TaskCheckpoint], generation: int) -> DoneAhead | None:
    """The count a batch's summary recorded, if it still speaks of `checkpoints`: of their generation, the
    summary must hold their very offsets (else a later batch committed without one, or they were reset);
    of a later generation, only rescales came since."""
    if not summary or "done_ahead" not in summary or not summary.get("offsets_committed"):
        return None
    offsets: Mapping[str, Mapping[str, int]] = summary["offsets_committed"]
    if summary.get("generation") == generation:
        for cp in checkpoints:
            if offsets.get(cp.task_name.name) != {ssp_to_key(s): o for s, o in cp.offsets.items()}:
                return None
    elif summary.get("generation", generation) > generation:
        return None
    starts: dict[SystemStreamPartition, int] = {}
    for by_sspkb in offsets.values():
        for key, offset in by_sspkb.items():
            base = ssp_from_key(key).without_key_bucket()
            starts[base] = min(offset, starts.get(base, offset))
    return DoneAhead(int(summary["done_ahead"]), bool(summary.get("lag_left_exact", False)), starts)
