"""The local RocksDB (rocksdict) of one (virtual task, store), and its local checkpoints.

Layout under `job.state.dir`: `<task>/<store>/db` is the live store, and
`<task>/<store>/checkpoint-<checkpointId>` a RocksDB checkpoint (hard links to
the immutable SST files, taken in the synchronous snapshot, as Samza does). A
checkpoint folder counts only once its `CHECKPOINT-ID` file is written, so a
crash while creating it leaves nothing a restore would trust.

The live store is scratch: writes go to it directly (no WAL: durability comes
from checkpoints), and a restore rebuilds it from the checkpoint that was
committed, which is how uncommitted changes are trimmed.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import quote

from rocksdict import Checkpoint, Options, Rdict, WriteOptions

from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.jobmodel.model import TaskName

CHECKPOINT_ID_FILE = "CHECKPOINT-ID"
_SKIPPED = {"LOCK", CHECKPOINT_ID_FILE}  # never copied nor uploaded: per process or rewritten
KEEP_LOG_FILE_NUM = 2  # Samza's rocksdb.keep.log.file.num default: each open starts a new info LOG
MAX_LOG_FILE_SIZE = 1 << 20
"""An info LOG rolls at this size (Samza's rocksdb.max.log.file.size is 64 MB, for a container's few stores):
a store that stays open in its worker logs each flush and checkpoint, about 7.5 KB a batch, so without a
limit its LOG grows with the job's age, in every virtual task's store."""
MAX_MANIFEST_FILE_SIZE = 1 << 20  # RocksDB's default is 1 GB; the MANIFEST gains some 160 bytes a batch


def open_db(path: Path) -> Rdict:
    """A store opens once per batch or more: its older info LOGs are dropped (else one stays per open), and
    its files open on one thread (a virtual task's store, one key bucket of a partition, has a few files:
    3.7 ms an open here, against 6.0 ms with RocksDB's default of 16 file-opening threads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_keep_log_file_num(KEEP_LOG_FILE_NUM)
    options.set_max_log_file_size(MAX_LOG_FILE_SIZE)
    options.set_max_manifest_file_size(MAX_MANIFEST_FILE_SIZE)
    options.set_max_file_opening_threads(1)
    db = Rdict(str(path), options)
    write = WriteOptions()
    write.disable_wal = True  # type: ignore[method-assign,assignment]  # a property at run time; rocksdict's stub says a method
    db.set_write_options(write)
    return db


def raw_items(db: Rdict, from_key: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
    """A raw-mode store's entries (bytes keys and values; rocksdict's stub types its pickling mode)."""
    return cast(Iterator[tuple[bytes, bytes]], db.items() if from_key is None else db.items(from_key=from_key))


@dataclass(frozen=True)
class StoreDirs:
    """The folders of one (virtual task, store)."""

    root: Path

    @classmethod
    def of(cls, state_dir: Path, task: TaskName, store: str) -> StoreDirs:
        return cls(Path(state_dir) / quote(task.name, safe="-_.") / store)  # task names hold spaces and brackets

    @property
    def live(self) -> Path:
        return self.root / "db"

    def checkpoint(self, checkpoint_id: CheckpointId) -> Path:
        return self.root / f"checkpoint-{checkpoint_id}"

    def valid_checkpoint(self, checkpoint_id: CheckpointId) -> Path | None:
        path = self.checkpoint(checkpoint_id)
        return path if read_checkpoint_id(path) == checkpoint_id else None

    def checkpoints(self) -> list[Path]:
        return sorted(self.root.glob("checkpoint-*")) if self.root.exists() else []


def read_checkpoint_id(folder: Path) -> CheckpointId | None:
    try:
        return CheckpointId.parse((folder / CHECKPOINT_ID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def write_checkpoint_id(folder: Path, checkpoint_id: CheckpointId) -> None:
    """Atomically: the file is the folder's seal."""
    tmp = folder / f".{CHECKPOINT_ID_FILE}.tmp"
    with open(tmp, "w") as f:
        f.write(str(checkpoint_id))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / CHECKPOINT_ID_FILE)


def create_checkpoint(db: Rdict, target: Path, checkpoint_id: CheckpointId) -> Path:
    """A RocksDB checkpoint (hard links; it flushes the memtable first), then sealed."""
    if target.exists():  # a leftover of a crash with the same id: never trusted
        shutil.rmtree(target)
    Checkpoint(db).create_checkpoint(str(target))
    write_checkpoint_id(target, checkpoint_id)
    return target


def clone(src: Path, dst: Path) -> None:
    """A new live store from a checkpoint: SST files hard-linked (immutable), the rest copied
    (RocksDB rewrites those in place, which must not reach the checkpoint through a link)."""
    if dst.exists():
        shutil.rmtree(dst)
    tmp = dst.with_name(dst.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for f in src.iterdir():
        if f.name in _SKIPPED or not f.is_file():
            continue
        if f.suffix == ".sst":
            os.link(f, tmp / f.name)
        else:
            shutil.copy2(f, tmp / f.name)
    os.replace(tmp, dst)


def snapshot_files(folder: Path) -> list[Path]:
    """The files that make up a checkpoint, for upload."""
    return sorted(f for f in folder.iterdir() if f.is_file() and f.name not in _SKIPPED and not f.name.startswith("."))


def disk_usage(folder: Path) -> int:
    """Bytes of the files under `folder`; one that RocksDB's background compaction deletes meanwhile counts none
    (that race failed a snapshot, and with it the batch, here)."""
    total = 0
    for f in folder.rglob("*") if folder.exists() else ():
        try:
            st = f.stat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
    return total
