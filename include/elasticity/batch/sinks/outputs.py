"""Where a batch's results go: Parquet datasets written once per (batch, process
slot), so a retried batch overwrites its own files and leaves no duplicates,
and Kafka topics: exactly-once through staged rows and one transaction per batch
(batch/sinks/exactly_once.py), or at-least-once with `processing.guarantee=at_least_once`.

Layout: flat, every file in the root, `batch_id` and the virtual task (`task_name`) columns in each:
- `batch-<n:012d>-e<epoch>-slot-<i>.parquet`: what process slot i wrote for batch n in the attempt that held the
  job's lease at `epoch` (`checkpoint.store.leases`); a batch writes a bounded number of files however many
  virtual tasks it has. Of a batch's files in a root only those of its highest epoch are the batch's: an attempt
  writes or commits a batch only while no later attempt has taken the lease, so a later epoch's files are those
  of the attempt that may commit it, and a superseded attempt's (written late, by an attempt paused or cut off)
  are `superseded`, never read, deleted by the next cleanup or compaction. Every slot of an attempt writes a file
  to every root, empty or not, so the committing attempt's epoch is the highest in each. A name without an
  epoch (an earlier version's, a tool's) is always read;
- `compacted-<first:012d>-<last:012d>.parquet`: every row of batches first..last, merged by
  `batch.sinks.compaction` (so that a job running for months keeps a bounded number of files). A compacted file
  supersedes every file whose batches it covers, an older compacted file too: `read_table` never reads those,
  and compaction deletes them.
pyarrow, pandas and Spark read the root as one dataset once compaction has deleted what it covered. Hive folders
(`batch_id=<n>/`) cannot hold a file of many batches (a partition column's value comes from the folder), so
earlier versions' folders, `batch_id` from the folder name (and in the files of a file per virtual task), are
read here and compacted into the flat layout. A reader never sees half a file: on a local disk files are
written under a temporary name (a leading `.`, which every reader skips) and renamed, on an object store in
one PUT.
"""

from __future__ import annotations

import bisect
import functools
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import groupby
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from elasticity.jobmodel.model import TaskName

SOURCE_FIELDS = [  # where an input record came from: the first columns of records, audit rows and dead letters
    ("system", pa.string()),
    ("stream", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("key", pa.binary()),
]


class AuditStatus(StrEnum):
    """What became of an input record, in its audit row: processed, or sent to the dead letters."""

    PROCESSED = "processed"
    DEAD_LETTER = "dead_letter"


AUDIT_SCHEMA = pa.schema(
    [
        *SOURCE_FIELDS,
        ("task_name", pa.string()),
        ("batch_id", pa.int64()),
        ("seq", pa.int64()),
        ("status", pa.string()),  # an AuditStatus
    ]
)

DEAD_LETTER_SCHEMA = pa.schema(
    [
        *SOURCE_FIELDS,
        ("value", pa.binary()),
        ("task_name", pa.string()),
        ("batch_id", pa.int64()),
        ("error", pa.string()),
    ]
)

Source = tuple[str, str, int, int]  # system, stream, partition, offset of an input record


def dead_letter(
    source: Source, key: bytes | None, value: bytes | None, *, task_name: TaskName, batch_id: int, error: str
) -> dict[str, Any]:
    """One row of the dead-letter sink (DEAD_LETTER_SCHEMA): the record as it was read and why it was not
    processed, so it can be replayed or inspected without the input topic; built here for every cause."""
    system, stream, partition, offset = source
    return {
        "system": system,
        "stream": stream,
        "partition": partition,
        "offset": offset,
        "key": key,
        "value": value,
        "task_name": task_name.name,
        "batch_id": batch_id,
        "error": error,
    }


OUTPUT_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("task_name", pa.string()),
        ("batch_id", pa.int64()),
        ("seq", pa.int64()),  # position in the task's output order within the batch
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("source_system", pa.string()),  # null in files written before these two columns
        ("source_stream", pa.string()),
        # the generation that wrote it: a replay's rows carry a higher one than the rows of the range they replay
        # (a later version); null in files written before this column
        ("generation", pa.int32()),
    ]
)


def in_file(schema: pa.Schema) -> pa.Schema:
    """The columns a writer hands `write_batch_file`: all of a sink's but `batch_id`, which that sets."""
    return schema.remove(schema.get_field_index("batch_id"))


BATCH_FILE = re.compile(r"batch-(\d+)-(?:e(\d+)-)?(.+)\.parquet")
COMPACTED_FILE = re.compile(r"compacted-(\d+)-(\d+)\.parquet")
LEGACY_FOLDER = re.compile(r"batch_id=(-?\d+)")  # an earlier version's Hive folder of one batch


def batch_file_name(batch_id: int, name: str, epoch: int | None = None) -> str:
    return f"batch-{batch_id:012d}-{name}.parquet" if epoch is None else f"batch-{batch_id:012d}-e{epoch}-{name}.parquet"


def compacted_file_name(first: int, last: int) -> str:
    return f"compacted-{first:012d}-{last:012d}.parquet"


@dataclass(frozen=True, kw_only=True)
class SinkFile:
    """One data file of a sink's root and the batches whose rows it holds (a batch file or an earlier
    version's file: one batch; a compacted file: first..last, every row of each)."""

    path: str  # on the root's file system
    kind: Literal["batch", "legacy", "compacted"]
    first: int
    last: int
    size: int
    mtime_ms: int
    epoch: int | None = None  # a batch file's writer's lease epoch (None: a name without one)

    def covers(self, other: SinkFile) -> bool:
        return self.kind == "compacted" and self is not other and self.first <= other.first and other.last <= self.last


@dataclass(frozen=True, kw_only=True)
class Listing:
    """A root as one listing shows it: `live`, the files a reader reads (in batch order), and `covered`, those a
    compacted file holds already (left by a compaction that stopped before deleting them; never read)."""

    root: str
    live: tuple[SinkFile, ...]
    covered: tuple[SinkFile, ...]
    temporary: tuple[SinkFile, ...]  # half-written files, `.<uuid>.tmp` (kind and batches meaningless)
    superseded: tuple[SinkFile, ...] = ()  # a batch's files of an epoch below its highest: a superseded attempt's

    @property
    def files(self) -> tuple[SinkFile, ...]:
        return self.live + self.covered + self.superseded


def open_root(root: str) -> tuple[pafs.FileSystem, str]:
    """The root's file system and its path there: a local folder, or shared storage such as S3 on a cluster."""
    return pafs.FileSystem.from_uri(root) if "://" in root else (pafs.LocalFileSystem(), root)


@functools.lru_cache(maxsize=64)
def _file_system(root: str) -> tuple[pafs.FileSystem, str]:
    """One client per root and process: an S3 client costs more to make than a small file to write."""
    return open_root(root)


def _parse(rel: str, info: pafs.FileInfo) -> SinkFile | None:
    mtime_ms = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
    parts = rel.split("/")
    if len(parts) == 1 and (m := BATCH_FILE.fullmatch(parts[0])):
        epoch = int(m[2]) if m[2] is not None else None
        return SinkFile(
            path=info.path, kind="batch", first=int(m[1]), last=int(m[1]), size=info.size or 0, mtime_ms=mtime_ms, epoch=epoch
        )
    if len(parts) == 1 and (m := COMPACTED_FILE.fullmatch(parts[0])):
        return SinkFile(path=info.path, kind="compacted", first=int(m[1]), last=int(m[2]), size=info.size or 0, mtime_ms=mtime_ms)
    if len(parts) == 2 and (m := LEGACY_FOLDER.fullmatch(parts[0])):
        return SinkFile(path=info.path, kind="legacy", first=int(m[1]), last=int(m[1]), size=info.size or 0, mtime_ms=mtime_ms)
    return None  # not a sink's file: read by no one here


def list_root(root: str) -> Listing:
    """One recursive listing of the root (on S3 one paginated LIST), the files sorted by their batches; what a
    compacted file covers set apart. Two compacted files that overlap without one covering the other were never
    written by compaction: the listing fails rather than guess."""
    fs, base = open_root(root)
    base = base.rstrip("/")
    files, temporary = [], []
    for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(base) + 1 :]
        if rel.startswith(".") and rel.endswith(".tmp") and "/" not in rel:
            temporary.append(
                SinkFile(
                    path=info.path,
                    kind="batch",
                    first=-1,
                    last=-1,
                    size=info.size or 0,
                    mtime_ms=(info.mtime_ns or 0) // 1_000_000,
                )
            )
        if any(p.startswith((".", "_")) for p in rel.split("/")):
            continue
        f = _parse(rel, info)
        if f is not None:
            files.append(f)
    files.sort(key=lambda f: (f.first, -f.last, f.kind, f.path))
    files, superseded = _by_epoch(files)
    compacted = [f for f in files if f.kind == "compacted"]
    ranges = [c for c in compacted if not any(o.covers(c) for o in compacted)]  # sorted by first
    for a, b in zip(ranges, ranges[1:], strict=False):
        if b.first <= a.last:
            raise ValueError(f"compacted files overlap without one covering the other: {a.path}, {b.path}")
    firsts = [c.first for c in ranges]

    def covered(f: SinkFile) -> bool:
        i = bisect.bisect_right(firsts, f.first) - 1
        return i >= 0 and ranges[i].covers(f)

    live = tuple(f for f in files if not covered(f))
    return Listing(
        root=root,
        live=live,
        covered=tuple(f for f in files if covered(f)),
        temporary=tuple(temporary),
        superseded=superseded,
    )


def _by_epoch(files: list[SinkFile]) -> tuple[list[SinkFile], tuple[SinkFile, ...]]:
    """The files kept (in their order) and those of a batch's epochs below its highest (a superseded attempt's)."""
    top: dict[int, int] = {}
    for f in files:
        if f.epoch is not None:
            top[f.first] = max(top.get(f.first, f.epoch), f.epoch)
    if all(f.epoch is None or f.epoch == top[f.first] for f in files):
        return files, ()
    kept = [f for f in files if f.epoch is None or f.epoch == top[f.first]]
    return kept, tuple(f for f in files if f.epoch is not None and f.epoch != top[f.first])


def with_batch_id(table: pa.Table, batch_id: int) -> pa.Table:
    """`table` with column `batch_id` all `batch_id`: replaced where it is, else placed after `task_name`,
    where every sink schema has it."""
    column = pc.fill_null(pa.nulls(table.num_rows, pa.int64()), batch_id)
    field = pa.field("batch_id", pa.int64())
    if "batch_id" in table.schema.names:
        return table.set_column(table.schema.get_field_index("batch_id"), field, column)
    at = table.schema.get_field_index("task_name") + 1 if "task_name" in table.schema.names else table.num_columns
    return table.add_column(at, field, column)


def write_atomically(fs: pafs.FileSystem, final: str, write: Any) -> None:
    """Make the file `final` with `write(where)` so that a reader sees all of it or nothing: on a local disk
    under a temporary name (a leading `.`: skipped by every reader), then renamed; on an object store (S3) in
    one PUT (or one multipart upload, which shows whole on completion), which is atomic and needs no folders,
    where a rename would be a copy and a delete."""
    if not isinstance(fs, pafs.LocalFileSystem):
        write(final)
        return
    folder = final.rsplit("/", 1)[0]
    fs.create_dir(folder, recursive=True)
    tmp = f"{folder}/.{uuid.uuid4().hex}.tmp"
    write(tmp)
    fs.move(tmp, final)


def write_batch_file(root: str, batch_id: int, name: str, table: pa.Table, *, epoch: int | None = None) -> str:
    """Write (or overwrite) the file `name` of one batch, `batch-<n:012d>-e<epoch>-<name>.parquet` (without an
    epoch, `batch-<n:012d>-<name>.parquet`), its `batch_id` a column (set here, so that the name and the rows never
    disagree), atomically (`write_atomically`). Its name carries the writer's epoch: an attempt never overwrites,
    nor renames onto, another attempt's file."""
    fs, base = _file_system(root)
    table = with_batch_id(table, batch_id)
    final = f"{base.rstrip('/')}/{batch_file_name(batch_id, name, epoch)}"
    write_atomically(fs, final, lambda where: pq.write_table(table, where, filesystem=fs))
    return final


def output_roots(root: str) -> list[str]:
    """The dataset of each `parquet.<name>` output under `job.output.path`, sorted by name, on whatever
    file system the root is (on a cluster it is shared storage such as S3, not a local folder)."""
    fs, base = open_root(root)
    listed = fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    names = sorted(i.base_name for i in listed if i.type == pafs.FileType.Directory and not i.base_name.startswith((".", "_")))
    return [f"{root.rstrip('/')}/{n}" for n in names]


def delete_batches(root: str, batch_ids: Iterable[int], *, through_epoch: int | None = None) -> None:
    """Remove the files of batches that will never commit (abandoned by a rescale), or that are about to be
    written again (a retried batch, whose slots may now be others). Compaction takes committed batches only,
    which are never written again: a batch inside a compacted file is refused. With `through_epoch` (the
    deleting attempt's, which checked that it still holds the lease), only files of that epoch or below (and
    names without one): a later attempt's files are never touched."""
    ids = set(batch_ids)
    if not ids:
        return
    fs, _ = open_root(root)
    listing = list_root(root)
    compacted = [f for f in listing.live if f.kind == "compacted" and any(f.first <= b <= f.last for b in ids)]
    if compacted:
        raise ValueError(f"batches {sorted(ids)} of {root}: compacted already ({compacted[0].path}), committed long ago")
    for f in listing.files:
        if f.kind == "batch" and f.first in ids and (through_epoch is None or f.epoch is None or f.epoch <= through_epoch):
            fs.delete_file(f.path)
    for folder in {f.path.rsplit("/", 1)[0] for f in listing.files if f.kind == "legacy" and f.first in ids}:
        fs.delete_dir(folder)


def read_table(root: str, schema: pa.Schema, batch_ids: Iterable[int] | None = None) -> pa.Table:
    """The rows of a dataset written here (empty when there are none yet): all, or only those of
    `batch_ids` (a compacted file read through its row groups' batch_id statistics). Each row once: files a
    compacted file covers are not read. A file deleted between the listing and its read (a compaction finishing
    meanwhile) makes a new listing, whose compacted file holds its rows."""
    ids = None if batch_ids is None else sorted(set(batch_ids))
    return Retrying(retry=retry_if_exception_type(FileNotFoundError), stop=stop_after_attempt(3), reraise=True)(
        lambda: read_files(root, list_root(root).live, schema, ids)
    )


def wanted(files: Sequence[SinkFile], ids: Sequence[int] | None) -> list[SinkFile]:
    """The files holding rows of batches `ids` (sorted), all when None."""
    if ids is None:
        return list(files)

    def holds(f: SinkFile) -> bool:
        i = bisect.bisect_left(ids, f.first)
        return i < len(ids) and ids[i] <= f.last

    return [f for f in files if holds(f)]


def read_batches(
    root: str, files: Sequence[SinkFile], schema: pa.Schema, ids: Sequence[int] | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of `files` (live files of one root, in batch order) as record batches, in that order; only
    those of batches `ids` (sorted) when given. A committed file that cannot be read fails the read, naming it:
    never fewer rows."""
    import pyarrow.dataset as ds

    fs, _ = open_root(root)
    at = schema.get_field_index("batch_id")
    for (kind, batch), group in groupby(wanted(files, ids), key=lambda f: (f.kind, f.first if f.kind == "legacy" else 0)):
        paths = [f.path for f in group]
        if kind == "legacy":  # batch_id from the folder's name
            for b in ds.dataset(paths, schema=in_file(schema), filesystem=fs, format="parquet").to_batches():
                column = pc.fill_null(pa.nulls(b.num_rows, pa.int64()), batch)
                yield pa.RecordBatch.from_arrays([*b.columns[:at], column, *b.columns[at:]], schema=schema)
            continue
        where = None if ids is None or kind == "batch" else pc.field("batch_id").isin(pa.array(ids, pa.int64()))
        yield from ds.dataset(paths, schema=schema, filesystem=fs, format="parquet").to_batches(filter=where)


def read_files(root: str, files: Sequence[SinkFile], schema: pa.Schema, ids: Sequence[int] | None = None) -> pa.Table:
    return pa.Table.from_batches(list(read_batches(root, files, schema, ids)), schema=schema)
