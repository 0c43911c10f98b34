"""An in-memory keyed stream and a pure-Python reference runner.

The runner applies the library's real rules (plan_ranges, the engine's routing `route_records`, advance), the
real coordinator and migration, and a real SQL store, to records held in memory,
and logs every record it processes so tests can check loss, order and duplicates.
It records each batch's summary as the engine does, so the lag probe reads what it would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kafka.partitioner.default import murmur2

from elasticity.batch.container.routing import RouteTable, route_records
from elasticity.batch.coordinator.behind import after_batch
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.coordinator.lag import done_ahead
from elasticity.batch.coordinator.outcome import batch_summary
from elasticity.batch.coordinator.planning import advance, plan_ranges
from elasticity.checkpoint.batch_plan import BatchPlan, OffsetRange
from elasticity.checkpoint.store import Generation
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint, state_of
from elasticity.jobmodel.keybucket import record_hash
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName
from elasticity.state import ContainerStorageManager


class MemoryInputs:
    """Topics as lists of (key, value) per partition, partitioned like Kafka's default partitioner."""

    def __init__(self) -> None:
        self.topics: dict[SystemStream, list[list[tuple[bytes | None, bytes]]]] = {}
        self._rr = 0

    def create(self, stream: SystemStream, partitions: int) -> None:
        self.topics[stream] = [[] for _ in range(partitions)]

    def add_partitions(self, stream: SystemStream, extra: int) -> None:
        self.topics[stream].extend([] for _ in range(extra))

    def produce(self, stream: SystemStream, key: bytes | None, value: bytes) -> SystemStreamPartition:
        parts = self.topics[stream]
        if key is None:
            self._rr += 1
            p = self._rr % len(parts)
        else:
            p = (murmur2(key) & 0x7FFFFFFF) % len(parts)
        parts[p].append((key, value))
        return SystemStreamPartition(stream.system, stream.stream, p)

    def record(self, ssp: SystemStreamPartition, offset: int) -> tuple[bytes | None, bytes]:
        return self.topics[ssp.system_stream][ssp.partition][offset]

    def all_ssps(self) -> list[SystemStreamPartition]:
        return [SystemStreamPartition(s.system, s.stream, p) for s, parts in self.topics.items() for p in range(len(parts))]

    # --- the Inputs protocol of the coordinator ---

    def partition_counts(self, streams: Iterable[SystemStream]) -> dict[SystemStream, int]:
        return {s: len(self.topics[s]) for s in streams if s in self.topics}

    def offsets(self, ssps: Iterable[SystemStreamPartition], which: str) -> dict[SystemStreamPartition, int]:
        return {s: 0 if which == "oldest" else len(self.topics[s.system_stream][s.partition]) for s in ssps}


@dataclass
class Processed:
    ssp: SystemStreamPartition
    offset: int
    key: bytes | None
    task: TaskName
    batch_id: int


@dataclass
class ReferenceRunner:
    coordinator: JobCoordinator
    inputs: MemoryInputs
    log: list[Processed] = field(default_factory=list)

    def run_batch(self, max_records: int, owner: str | None = None, budgets: Mapping[TaskName, int] | None = None) -> BatchPlan:
        """One batch; a task with a budget processes at most that many records, then stops (a slow slice)."""
        c = self.coordinator
        generation = c.initialize(owner)
        cps = c.checkpoints(generation)
        hws = {
            s: len(self.inputs.topics[s.system_stream][s.partition])
            for cp in cps.values()
            for s in map(SystemStreamPartition.without_key_bucket, cp.offsets)
        }
        plan = c.store.plan_batch(c.job, generation.number, plan_ranges(cps.values(), hws, max_records), owner=owner)
        self.log = [p for p in self.log if p.batch_id != plan.batch_id]  # a retry overwrites its own output, as the sink does
        table = RouteTable.of(generation.factor, cps, dict.fromkeys(cps, 0))  # the engine's routing, one slot
        task_of = {t.name: t for t in cps}
        remaining = dict(budgets or {})
        halted: set[TaskName] = set()
        stopped: dict[TaskName, dict[SystemStreamPartition, int]] = {t: {} for t in cps}
        for r in plan.ranges:  # slices run in (SSP, offset) order
            for offset, key, bucket, name in self._routed(table, r):
                t = task_of[name]
                if t in halted or remaining.get(t) == 0:
                    halted.add(t)
                    stopped[t].setdefault(r.ssp.with_key_bucket(bucket), offset)  # its first unprocessed record there
                    continue
                if t in remaining:
                    remaining[t] -= 1
                self.log.append(Processed(r.ssp, offset, key, t, plan.batch_id))
        new = [advance(cp, plan.ranges, stopped[t]) for t, cp in cps.items()]
        ran = [p for p in self.log if p.batch_id == plan.batch_id]
        new = self.with_state(cps, new, ran)
        c.store.commit_batch(plan, new, c.config.checkpoint_write_versions, owner=owner)
        self._record_summary(generation, plan, cps, new, kept=len(ran), high=hws)
        return plan

    def _record_summary(
        self,
        generation: Generation,
        plan: BatchPlan,
        cps: Mapping[TaskName, TaskCheckpoint],
        new: list[TaskCheckpoint],
        *,
        kept: int,
        high: dict[SystemStreamPartition, int],
    ) -> None:
        """The batch's summary in the store, with the count of records above the slowest tasks already processed."""
        c = self.coordinator
        done = after_batch(done_ahead(c.store, c.job, generation.number, cps.values()), kept, new)
        summary = batch_summary(
            c.job, generation, plan, {cp.task_name: cp for cp in new}, high=high, durations={}, metrics={}, done=done
        )
        summary.kept = kept
        c.store.record_metrics(c.job, plan.batch_id, generation.number, summary.to_json())

    def _routed(self, table: RouteTable, r: OffsetRange) -> list[tuple[int, bytes | None, int, str]]:
        """The records of `r` its tasks have yet to process (offset, key, key bucket, task), as a slot routes them."""
        offsets = list(range(r.start, r.end))
        keys = [self.inputs.record(r.ssp, o)[0] for o in offsets]
        routes = route_records(table, (r.ssp.system, r.ssp.stream, r.ssp.partition), keys, offsets, slot=0)
        return [(offsets[i], keys[i], b, t) for i, b, t in zip(routes.kept, routes.buckets, routes.tasks, strict=True)]

    def with_state(
        self, cps: Mapping[TaskName, TaskCheckpoint], new: list[TaskCheckpoint], processed: list[Processed]
    ) -> list[TaskCheckpoint]:
        """The checkpoints to commit, with the state they commit (none here: see StatefulRunner)."""
        return new

    def drain(self) -> None:
        for _ in range(1000):
            plan = self.run_batch(10**9)
            if plan.records == 0:
                return
        raise AssertionError("did not catch up")

    # --- the invariants ---

    def assert_no_duplicates(self) -> None:
        seen = set()
        for p in self.log:
            assert (p.ssp, p.offset) not in seen, f"processed twice: {p}"
            seen.add((p.ssp, p.offset))

    def assert_key_order(self) -> None:
        last: dict[tuple[SystemStreamPartition, bytes | None], int] = {}
        for p in self.log:
            if p.key is None:
                continue
            k = (p.ssp, p.key)
            assert p.offset > last.get(k, -1), f"key {p.key!r} of {p.ssp} out of order at offset {p.offset}"
            last[k] = p.offset

    def assert_checkpoints_cover_only_processed(
        self, generation: Generation | None = None, cps: Mapping[TaskName, TaskCheckpoint] | None = None
    ) -> None:
        """No loss: below a task's checkpoint, or under one of its watermarks, every record of its bucket was processed.
        The current generation and its checkpoints, read here unless the caller read them already."""
        generation = generation or self.coordinator.current()
        if generation is None:
            return
        done = {(p.ssp, p.offset) for p in self.log}
        for cp in (self.coordinator.checkpoints(generation) if cps is None else cps).values():
            for ssp, next_offset in cp.offsets.items():
                base = ssp.without_key_bucket()
                for offset in range(min(next_offset, len(self.inputs.topics[base.system_stream][base.partition]))):
                    key, _ = self.inputs.record(base, offset)
                    h = record_hash(key, offset)
                    if generation.factor > 1 and h % generation.factor != ssp.key_bucket:
                        continue
                    assert (base, offset) in done, f"{cp.task_name.name} is past {base}@{offset}, which was never processed"
                for w in cp.watermarks.get(ssp, ()):
                    for offset in range(w.offset):
                        key, _ = self.inputs.record(base, offset)
                        if w.covers(record_hash(key, offset), offset):
                            assert (base, offset) in done, (
                                f"watermark {w} of {cp.task_name.name} covers unprocessed {base}@{offset}"
                            )

    def assert_everything_processed_once(self) -> None:
        self.assert_no_duplicates()
        done = {(p.ssp, p.offset) for p in self.log}
        for ssp in self.inputs.all_ssps():
            for offset in range(len(self.inputs.topics[ssp.system_stream][ssp.partition])):
                assert (ssp, offset) in done, f"lost {ssp}@{offset}"


class StatefulRunner(ReferenceRunner):
    """The reference runner with real state: each virtual task keeps per input key {count, sum of
    the values' numbers} in its store `aggs` (tests/support/apps.py:aggregates), committed with its
    checkpoint through the real state package (RocksDB, blob-store snapshots), moved by the real rescale."""

    STORE = "aggs"

    def with_state(self, cps, new, processed):
        storage, descriptors = self.coordinator.storage
        touched = {p.task for p in processed if p.key is not None}
        out = [
            replace(cp, checkpoint_id=cps[cp.task_name].checkpoint_id, state_markers=cps[cp.task_name].state_markers)
            for cp in new
        ]
        if not touched:
            return out
        models = [t for t in self.coordinator.current().job_model.tasks() if t.task_name in touched]
        csm = ContainerStorageManager(storage, descriptors, models, len(cps))
        try:
            csm.restore({t: state_of(cps[t]) for t in touched})
            for p in processed:
                if p.key is not None:
                    store = csm.store(p.task, self.STORE)
                    store.put(p.key, _add(store.get(p.key), self.inputs.record(p.ssp, p.offset)[1]))
            cp_id = CheckpointId.create()
            markers = csm.upload(csm.snapshot(cp_id))
        finally:
            csm.close()
        return [
            replace(cp, checkpoint_id=cp_id, state_markers=markers[cp.task_name]) if cp.task_name in touched else cp for cp in out
        ]

    def expected_state(self) -> dict[tuple[int, bytes], dict[str, int]]:
        """Per (input partition, key), the aggregate over every record processed (and committed) so far."""
        out: dict[tuple[int, bytes], dict[str, int]] = {}
        for p in self.log:
            if p.key is not None:
                out[(p.ssp.partition, p.key)] = _add(out.get((p.ssp.partition, p.key)), self.inputs.record(p.ssp, p.offset)[1])
        return out


def _add(agg: dict[str, int] | None, value: bytes) -> dict[str, int]:
    agg = agg or {"count": 0, "sum": 0}
    return {"count": agg["count"] + 1, "sum": agg["sum"] + int(value[1:])}
