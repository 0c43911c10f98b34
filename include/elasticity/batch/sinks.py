"""Where a batch's results go: Parquet datasets written once per (batch, process
slot), so a retried batch overwrites its own files and leaves no duplicates,
and Kafka topics: exactly-once through staged rows and one transaction per batch
(batch/exactly_once.py), or at-least-once with `processing.guarantee=at_least_once`.

Layout: `<root>/batch_id=<n>/slot-<i>.parquet`, Hive-style, the virtual task a
column (`task_name`): a batch writes a bounded number of files however many
virtual tasks it has, and pyarrow, pandas and Spark read the root as one dataset,
`batch_id` coming from the folder. (Earlier versions wrote a file per virtual
task, `batch_id` in the file as well; those files are read here as before.)
A reader never sees half a file: on a local disk files are written under a
temporary name and renamed, on an object store in one PUT.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from elasticity.jobmodel.model import TaskName

SOURCE_FIELDS = [  # where an input record came from: the first columns of records, audit rows and dead letters
    ("system", pa.string()),
    ("stream", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("key", pa.binary()),
]

AUDIT_SCHEMA = pa.schema(
    [
        *SOURCE_FIELDS,
        ("task_name", pa.string()),
        ("batch_id", pa.int64()),
        ("seq", pa.int64()),
        ("status", pa.string()),  # processed | dead_letter
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
    source: Source, key: bytes | None, value: bytes | None, task_name: TaskName, batch_id: int, error: str
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
    ]
)


def in_file(schema: pa.Schema) -> pa.Schema:
    """A sink's schema as its files hold it: without `batch_id`, which their folder names."""
    return schema.remove(schema.get_field_index("batch_id"))


def batch_folder(base: str, batch_id: int) -> str:
    return f"{base.rstrip('/')}/batch_id={batch_id}"


@functools.lru_cache(maxsize=64)
def _file_system(root: str) -> tuple[pafs.FileSystem, str]:
    """One client per root and process: an S3 client costs more to make than a small file to write."""
    return pafs.FileSystem.from_uri(root) if "://" in root else (pafs.LocalFileSystem(), root)


def write_batch_file(root: str, batch_id: int, name: str, table: pa.Table) -> str:
    """Write (or overwrite) the file `name` of one batch, its `batch_id` in the folder's name only (a column
    in both would be two fields to a dataset reader), atomically: on a local disk under a temporary name,
    then renamed; on an object store (S3) in one PUT, which is atomic and needs no folders, where a rename
    would be a copy and a delete."""
    fs, base = _file_system(root)
    folder = batch_folder(base, batch_id)
    if "batch_id" in table.schema.names:
        table = table.drop_columns(["batch_id"])
    final = f"{folder}/{name}.parquet"
    if not isinstance(fs, pafs.LocalFileSystem):
        pq.write_table(table, final, filesystem=fs)
        return final
    fs.create_dir(folder, recursive=True)
    tmp = f"{folder}/.{uuid.uuid4().hex}.tmp"
    pq.write_table(table, tmp, filesystem=fs)
    fs.move(tmp, final)
    return final


def output_roots(root: str) -> list[str]:
    """The dataset of each `parquet.<name>` output under `job.output.path`, sorted by name, on whatever
    file system the root is (on a cluster it is shared storage such as S3, not a local folder)."""
    fs, base = pafs.FileSystem.from_uri(root) if "://" in root else (pafs.LocalFileSystem(), root)
    listed = fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    names = sorted(i.base_name for i in listed if i.type == pafs.FileType.Directory and not i.base_name.startswith((".", "_")))
    return [f"{root.rstrip('/')}/{n}" for n in names]


def delete_batches(root: str, batch_ids: Iterable[int]) -> None:
    """Remove the files of batches that will never commit (abandoned by a rescale), or that are about to be
    written again (a retried batch, whose slots may now be others)."""
    fs, base = pafs.FileSystem.from_uri(root) if "://" in root else (pafs.LocalFileSystem(), root)
    for b in batch_ids:
        folder = batch_folder(base, b)
        if fs.get_file_info(folder).type == pafs.FileType.Directory:
            fs.delete_dir(folder)


def read_table(root: str, schema: pa.Schema, batch_ids: Iterable[int] | None = None) -> pa.Table:
    """The files of a dataset written here (empty when there are none yet): all, or only
    those of `batch_ids`, whose folders alone are listed and read (cost by batch, not by age).
    `batch_id` comes from each folder's name (a file an earlier version wrote has it as a column too)."""
    import pyarrow.dataset as ds

    fs, base = pafs.FileSystem.from_uri(root) if "://" in root else (pafs.LocalFileSystem(), root)
    if fs.get_file_info(base).type != pafs.FileType.Directory:
        return schema.empty_table()
    options = {
        "filesystem": fs,
        "format": "parquet",
        "exclude_invalid_files": False,  # a committed file that cannot be read fails the read, naming it: never fewer rows
        "ignore_prefixes": [".", "_"],
    }
    if batch_ids is None:
        partitioning = ds.partitioning(pa.schema([("batch_id", pa.int64())]), flavor="hive")
        return ds.dataset(base, partitioning=partitioning, schema=schema, **options).to_table()
    at = schema.get_field_index("batch_id")
    tables = []
    for b in sorted(set(batch_ids)):
        folder = batch_folder(base, b)
        if fs.get_file_info(folder).type == pafs.FileType.Directory:
            t = ds.dataset(folder, schema=in_file(schema), **options).to_table()
            tables.append(t.add_column(at, schema.field(at), pa.array([b] * t.num_rows, pa.int64())))
    return pa.concat_tables(tables) if tables else schema.empty_table()
