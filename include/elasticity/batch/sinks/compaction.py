"""Compaction and retention of the Parquet sinks, so that a job running for months keeps a bounded number of files.

Every micro-batch writes a file per sink and process slot (`batch.sinks.outputs`): at a batch a minute, 43,200 files a
month per sink. Compaction merges consecutive small files of validated batches into
`compacted-<first>-<last>.parquet` files of about `job.output.compaction.target.bytes` (bin-packing to a target
file size, as Spark/Delta's OPTIMIZE does); retention deletes whole files of validated batches older than the
sink's `*.retention.ms` (as Kafka deletes whole log segments by their newest record's time).

Per root, in steps a retry after a crash at any point finishes (`faults.point` names each), never losing or
doubling a row:
1. delete what a compacted file covers (a compaction that stopped between writing and deleting), a superseded
   attempt's files (`outputs.list_root`) and old temporary files (a writer that died before its rename);
2. expire: delete the files of validated batches whose newest batch is older than the retention;
3. compact: per group of consecutive files, write the compacted file atomically, then delete the group's files;
   a reader that lists both reads only the compacted file (`outputs.list_root`).
Only batches at or below `through_batch` are touched: the last batch committed and validated by data quality
(`quality.cursor.validated_batch`), which no retry writes again.

A batch's time is its files' modification time (written just before its commit); a compacted file carries the
times of what it holds in its footer (`elasticity.oldest.ms`, `elasticity.newest.ms`), its own mtime being the
compaction's. Where a retention applies, a compacted file spans at most a tenth of it, so that no row outlives
it by more than that while the file waits for its newest batch to expire.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from elasticity import faults
from elasticity.batch.sinks.outputs import (
    AUDIT_SCHEMA,
    DEAD_LETTER_SCHEMA,
    OUTPUT_SCHEMA,
    SinkFile,
    compacted_file_name,
    list_root,
    open_root,
    output_roots,
    read_batches,
    write_atomically,
    written_output_schema,
)
from elasticity.config.job import JobConfig

OLDEST_MS = b"elasticity.oldest.ms"
NEWEST_MS = b"elasticity.newest.ms"
SPAN_OF_RETENTION = 10  # a compacted file spans at most retention / 10 of batch times
TEMPORARY_AGE_MS = 3_600_000  # a temporary file this old belongs to a writer that died
CHUNK_BYTES = 64 << 20  # rows held in memory before they are written as row groups


@dataclass(frozen=True, kw_only=True)
class SinkReport:
    """What one maintenance run did to one sink's root."""

    sink: str  # parquet.<name>, audit or dead-letter
    root: str
    files_before: int
    files_after: int
    bytes_before: int
    bytes_after: int
    batches_compacted: int  # batches whose own files were merged into a compacted file
    files_written: int  # compacted files written
    files_expired: int


@dataclass(frozen=True)
class SinkMaintenance:
    """One maintenance run over a job's Parquet sinks: outputs, audit rows and dead letters."""

    through_batch: int
    sinks: tuple[SinkReport, ...]

    @property
    def files_before(self) -> int:
        return sum(s.files_before for s in self.sinks)

    @property
    def files_after(self) -> int:
        return sum(s.files_after for s in self.sinks)

    @property
    def files_expired(self) -> int:
        return sum(s.files_expired for s in self.sinks)


@dataclass(frozen=True)
class _Unit:
    """Files that move together: a batch's files, or a compacted file; with the batch times they hold."""

    files: tuple[SinkFile, ...]
    oldest_ms: int
    newest_ms: int

    @property
    def first(self) -> int:
        return self.files[0].first

    @property
    def last(self) -> int:
        return self.files[0].last

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def compacted(self) -> bool:
        return self.files[0].kind == "compacted"


def compact_sinks(config: JobConfig, *, through_batch: int, now_ms: int) -> SinkMaintenance:
    """Compact every Parquet sink of the job (each `parquet.<name>` output, the audit rows and the dead letters)
    up to `through_batch`, the job's last committed and validated batch, and apply each sink's retention."""
    sinks = [
        (f"parquet.{root.rsplit('/', 1)[-1]}", root, OUTPUT_SCHEMA, config.output_retention_ms)
        for root in output_roots(config.output_dir)
    ]
    sinks.append(("audit", config.audit_dir, AUDIT_SCHEMA, config.audit_retention_ms))
    sinks.append(("dead-letter", config.dead_letter_dir, DEAD_LETTER_SCHEMA, config.dead_letter_retention_ms))
    reports = tuple(
        compact_root(
            root,
            schema,
            sink=sink,
            through_batch=through_batch,
            now_ms=now_ms,
            target_bytes=config.compaction_target_bytes,
            retention_ms=retention_ms,
        )
        for sink, root, schema, retention_ms in sinks
    )
    return SinkMaintenance(through_batch, reports)


def compact_root(
    root: str,
    schema: pa.Schema,
    *,
    sink: str,
    through_batch: int,
    now_ms: int,
    target_bytes: int,
    retention_ms: int | None,
) -> SinkReport:
    """One sink's root: finish what a stopped run left, expire, compact (the module's three steps)."""
    fs, base = open_root(root)
    before = list_root(root)
    _delete(fs, before.covered)
    _delete(fs, [f for f in before.superseded if f.last <= through_batch])  # a superseded attempt's late files
    _delete(fs, [t for t in before.temporary if t.mtime_ms < now_ms - TEMPORARY_AGE_MS])
    eligible = [f for f in before.live if f.last <= through_batch]
    units = _units(fs, eligible, footer_below=None if retention_ms is not None else target_bytes // 2)
    expired = 0
    if retention_ms is not None:
        old = [u for u in units if u.newest_ms < now_ms - retention_ms]
        for u in old:
            _delete(fs, u.files, point="retention.deleted")
        expired = sum(len(u.files) for u in old)
        gone = {id(u) for u in old}
        units = [u for u in units if id(u) not in gone]
    span_ms = None if retention_ms is None else retention_ms // SPAN_OF_RETENTION
    groups = _groups(units, target_bytes, span_ms)
    for group in groups:
        files = [f for u in group for f in u.files]
        typed = written_output_schema(root, files) if sink.startswith("parquet.") else schema  # keeps typed columns
        _compact(root, f"{base.rstrip('/')}/{compacted_file_name(group[0].first, group[-1].last)}", group, typed)
    after = list_root(root)
    return SinkReport(
        sink=sink,
        root=root,
        files_before=len(before.files),
        files_after=len(after.files),
        bytes_before=sum(f.size for f in before.files),
        bytes_after=sum(f.size for f in after.files),
        batches_compacted=len({u.first for g in groups for u in g if not u.compacted}),
        files_written=len(groups),
        files_expired=expired,
    )


def _units(fs: pafs.FileSystem, files: Sequence[SinkFile], *, footer_below: int | None) -> list[_Unit]:
    """Live files in batch order as units. A compacted file's batch times are read from its footer (one read per
    file) when it is smaller than `footer_below` (it may be merged again), or always when that is None (a
    retention applies); else its mtime stands for them (later than its batches': never an early expiry)."""
    units = []
    for _, group in groupby(files, key=lambda f: (f.first, f.last, f.kind == "compacted")):
        held = tuple(group)
        oldest, newest = min(f.mtime_ms for f in held), max(f.mtime_ms for f in held)
        if held[0].kind == "compacted" and (footer_below is None or held[0].size < footer_below):
            meta = pq.read_metadata(held[0].path, filesystem=fs).metadata or {}
            oldest, newest = int(meta.get(OLDEST_MS, oldest)), int(meta.get(NEWEST_MS, newest))
        units.append(_Unit(held, oldest, newest))
    return units


def _groups(units: Sequence[_Unit], target_bytes: int, span_ms: int | None) -> list[list[_Unit]]:
    """Consecutive units bin-packed to about `target_bytes` (and spanning at most `span_ms` of batch times); a
    compacted file of half the target or more is done, and a group that is one compacted file has nothing to do."""
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    for u in units:
        full = u.compacted and u.size >= target_bytes // 2
        too_big = bool(current) and sum(c.size for c in current) + u.size > target_bytes
        too_long = bool(current) and span_ms is not None and u.newest_ms - min(c.oldest_ms for c in current) > span_ms
        if full or too_big or too_long:
            groups.append(current)
            current = []
        if not full:
            current.append(u)
    groups.append(current)
    return [g for g in groups if g and not (len(g) == 1 and g[0].compacted)]


def _compact(root: str, final: str, group: Sequence[_Unit], schema: pa.Schema) -> None:
    """Write the group's rows, in batch order, as the compacted file `final` (atomically), then delete the group's
    files, which the new file covers from the moment it exists."""
    fs, _ = open_root(root)
    files = [f for u in group for f in u.files]
    times = {OLDEST_MS: str(min(u.oldest_ms for u in group)).encode(), NEWEST_MS: str(max(u.newest_ms for u in group)).encode()}
    with_times = schema.with_metadata({**(schema.metadata or {}), **times})

    def write(where: str) -> None:
        with pq.ParquetWriter(where, with_times, filesystem=fs) as writer:
            for table in _chunks(read_batches(root, files, schema), schema):
                writer.write_table(table)
        faults.point("compaction.before_rename")

    write_atomically(fs, final, write)
    faults.point("compaction.written")
    _delete(fs, files)


def _chunks(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.Table]:
    """Record batches gathered into tables of about CHUNK_BYTES: row groups of a useful size, memory bounded."""
    held: list[pa.RecordBatch] = []
    for b in batches:
        held.append(b)
        if sum(h.nbytes for h in held) >= CHUNK_BYTES:
            yield pa.Table.from_batches(held, schema=schema)
            held = []
    if held:
        yield pa.Table.from_batches(held, schema=schema)


def _delete(fs: pafs.FileSystem, files: Iterable[SinkFile], *, point: str = "compaction.deleted") -> None:
    """Delete files one by one (an earlier version's folder of one batch as a whole), a fault point after each."""
    done: set[str] = set()
    for f in files:
        path = f.path.rsplit("/", 1)[0] if f.kind == "legacy" else f.path
        if path in done:
            continue
        if f.kind == "legacy":
            fs.delete_dir(path)
        else:
            fs.delete_file(path)
        done.add(path)
        faults.point(point)
