"""Blob-store state backend (Samza's BlobStoreStateBackendFactory): incremental
snapshots of a store's RocksDB checkpoint.

Upload sends only the files that the previous snapshot lacks: an SST file with
the same name and size is the same immutable file; a small file (CURRENT,
OPTIONS, MANIFEST, rocksdict's config) whose bytes equal one of the previous
snapshot's, as this backend uploaded or reused them, points at that file's blob
whatever its name (RocksDB writes a new OPTIONS file of the same content at each
open); an empty file has no blob (as in Samza's index). Then a SnapshotIndex
blob; the marker is the index's blob id, chosen in the synchronous snapshot so
that the checkpoint can name it before the upload ends (the driver waits for
the index: it is written last).
Every blob name starts with its snapshot's checkpoint id. Everything of a
(virtual task, store) lives under one prefix, so after a checkpoint is written
`cleanup` keeps the blobs of the last `stores.<s>.blob.retain` snapshots and of
snapshots newer than the committed one (uploads whose commit may still come,
from any process), and deletes the rest: older snapshots and whatever failed
or crashed uploads left (Samza expires those with a TTL). Indexes are
immutable, so a backend reads each once; it lists its prefix on its first
cleanup and every LIST_EVERY after, and in between deletes among the blobs it
listed or uploaded itself: a steady batch costs its uploads and deletes, no
index reads and no listing (blobs another process left wait for the next list).
"""

from __future__ import annotations

import logging
import time
import uuid
import zlib
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

from elasticity import faults
from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.config import BLOB_STORE_FACTORY
from elasticity.jobmodel.model import TaskName
from elasticity.state.backends import StateBackend, StoreContext
from elasticity.state.backends.blob_manager import BlobStoreManager, UploadFailed
from elasticity.state.backends.snapshot_index import FileBlob, FileIndex, FileMetadata, SnapshotIndex, SnapshotMetadata
from elasticity.state.rocksdb import snapshot_files

log = logging.getLogger(__name__)
LIST_EVERY = 20  # cleanups between listings of a store's prefix
AWAIT_THREADS = 8  # the driver's checks that a batch's snapshots are durable, side by side
SMALL_FILE = 64 << 10  # a file up to this size is compared by its bytes with the previous snapshot's small files


class ChecksumMismatch(OSError):
    pass


def job_prefix(job_name: str, job_id: str) -> str:
    """Where every blob of a job lives."""
    return f"{quote(job_name, safe='-_.')}-{quote(job_id, safe='-_.')}/"


def store_prefix(job_name: str, job_id: str, task: TaskName, store: str) -> str:
    """Where every blob of one (virtual task, store) lives."""
    return f"{job_prefix(job_name, job_id)}{quote(task.name, safe='-_.')}/{store}/"


def checkpoint_of(blob_id: str) -> CheckpointId | None:
    """The checkpoint id a blob name starts with (None: a name of another form)."""
    millis, _, rest = blob_id.rsplit("/", 1)[-1].partition("-")
    nano = rest.partition("-")[0].partition(".")[0]
    return CheckpointId(int(millis), int(nano)) if millis.isdigit() and nano.isdigit() else None


class BlobStoreStateBackend(StateBackend):
    factory = BLOB_STORE_FACTORY

    def __init__(self, context: StoreContext, blobs: BlobStoreManager, wait_s: float = 0) -> None:
        """`wait_s`: how long to wait for an index another upload promised (task.commit.timeout.ms)."""
        super().__init__(context)
        self.blobs = blobs
        self.wait_s = wait_s
        self.prefix = store_prefix(context.job_name, context.job_id, context.task, context.name)
        self.previous: tuple[str, SnapshotIndex] | None = None  # the base of the next incremental upload
        self._base: str | None = None  # its marker, read at the next upload (it may still be uploading elsewhere)
        self._indexes: dict[str, SnapshotIndex] = {}  # read or written here: an index never changes
        self._known: set[str] | None = None  # blobs under the prefix this backend listed or uploaded (None: list)
        self._contents: dict[tuple[FileBlob, ...], bytes] = {}  # the bytes of the small files of the last upload here
        self._cleanups = 0

    def read_index(self, blob_id: str, *, wait: bool = True) -> SnapshotIndex:
        if blob_id not in self._indexes:
            if wait and self.wait_s:
                self.blobs.await_blob(blob_id, self.wait_s)
            self._indexes[blob_id] = SnapshotIndex.from_json(self.blobs.get_bytes(blob_id).decode())
        return self._indexes[blob_id]

    def init(self, marker: str | None, store) -> None:
        self.previous, self._base = None, marker

    def snapshot(self, store, checkpoint_id: CheckpointId) -> str:
        """The index's blob id, known before the upload writes it."""
        return f"{self.prefix}index/{checkpoint_id}-{uuid.uuid4().hex[:8]}.json"

    def _previous(self) -> tuple[str, SnapshotIndex] | None:
        if self._base is not None:
            base, self._base = self._base, None
            try:
                self.previous = (base, self.read_index(base))
            except (FileNotFoundError, UploadFailed) as e:  # the base never became durable: upload everything
                log.warning(
                    "store %r of task %r: no base snapshot (%s); uploading every file",
                    self.context.name,
                    self.context.task.name,
                    e,
                )
        return self.previous

    def upload(self, checkpoint_id: CheckpointId, folder: Path, pending: str | None) -> str:
        previous = self._previous()
        known = {f.file_name: f for f in previous[1].files_present} if previous else {}
        # the previous snapshot's small files by their bytes, where this backend still holds them
        same_bytes = {held: f for f in known.values() if (held := self._contents.get(f.blobs)) is not None}
        contents: dict[tuple[FileBlob, ...], bytes] = {}
        present, uploaded = [], 0
        for path in snapshot_files(folder):
            st = path.stat()
            old = known.get(path.name)
            if (
                old is not None and path.suffix == ".sst" and old.same_file(path.name, st.st_size)
            ):  # others are rewritten in place
                present.append(old)
                continue
            if st.st_size == 0:
                present.append(FileIndex(path.name, (), FileMetadata.of(path), 0))
                continue
            small = path.read_bytes() if st.st_size <= SMALL_FILE else None
            if small is not None and (same := same_bytes.get(small)) is not None:
                present.append(FileIndex(path.name, same.blobs, FileMetadata.of(path), same.checksum))
                contents[same.blobs] = small
                continue
            blob_id = f"{self.prefix}files/{checkpoint_id}-{uuid.uuid4().hex}-{path.name}"
            self._uploading(blob_id)
            if small is None:
                crc = self.blobs.put_file(path, blob_id)
            else:
                self.blobs.put_bytes(blob_id, small)
                crc = zlib.crc32(small)
                contents[(FileBlob(blob_id),)] = small
            faults.point("state.blob.file_uploaded")
            uploaded += st.st_size
            present.append(FileIndex(path.name, (FileBlob(blob_id),), FileMetadata.of(path), crc))
        names = {f.file_name for f in present}
        kept = {b for f in present for b in f.blobs}
        c = self.context
        index = SnapshotIndex(
            creation_time_millis=int(time.time() * 1000),
            metadata=SnapshotMetadata(
                checkpoint_id=checkpoint_id, job_name=c.job_name, job_id=c.job_id, task_name=c.task.name, store_name=c.name
            ),
            files_present=tuple(present),
            # Samza's cleanUp deletes the blobs of removed files: not those a present file still points at
            files_removed=tuple(f for n, f in sorted(known.items()) if n not in names and not kept.intersection(f.blobs)),
            prev_snapshot_index_blob_id=previous[0] if previous else None,
        )
        index_id = pending or self.snapshot(None, checkpoint_id)
        data = index.to_json().encode()
        self._uploading(index_id)
        self.blobs.put_bytes(index_id, data)
        faults.point("state.blob.index_uploaded")
        self.previous = (index_id, index)
        self._indexes[index_id] = index
        self._contents = contents
        self.bytes_uploaded = uploaded + len(data)
        return index_id

    def cleanup(self, marker: str) -> None:
        """Keep the snapshots chained from the committed one, up to the retention, and the blobs of newer
        snapshots; delete every other blob."""
        committed = checkpoint_of(marker)
        keep: set[str] = set()
        blob_id: str | None = marker
        for _ in range(self.context.config.blob_retain):
            if blob_id is None:
                break
            try:
                index = self.read_index(blob_id, wait=False)
            except FileNotFoundError:
                break
            keep |= index.blob_ids() | {blob_id}
            blob_id = index.prev_snapshot_index_blob_id

        def expired(blob: str) -> bool:
            cp = checkpoint_of(blob)
            return blob not in keep and not (committed is not None and cp is not None and cp > committed)

        self._indexes = {i: index for i, index in self._indexes.items() if not expired(i)}
        if self._known is None or self._cleanups % LIST_EVERY == 0:
            self._known = set(self.blobs.list(self.prefix))
        self._cleanups += 1
        for found in sorted(filter(expired, self._known)):
            self.blobs.delete(found)
            self._known.discard(found)
            faults.point("state.blob.deleted")

    def _uploading(self, blob_id: str) -> None:
        """Known before the PUT: a cleanup after a failed upload deletes what it left."""
        if self._known is not None:
            self._known.add(blob_id)

    def restore(self, marker: str | None, folder: Path) -> str | None:
        if marker is None:
            raise ValueError(f"store {self.context.name!r}: the blob store restores only from a snapshot index")
        index = self.read_index(marker)
        folder.mkdir(parents=True)
        for f in index.files_present:
            crc = self._download(f, folder / f.file_name)
            if crc != f.checksum:
                raise ChecksumMismatch(
                    f"store {self.context.name!r}: {f.file_name} from {[b.blob_id for b in f.blobs]} has a bad checksum"
                )
        return marker

    def _download(self, f: FileIndex, target: Path) -> int:
        """A file from its blobs in offset order (Samza may upload a file in chunks; none for an empty file)."""
        blobs = sorted(f.blobs, key=lambda b: b.offset)
        if len(blobs) == 1:
            return self.blobs.get_file(blobs[0].blob_id, target)
        crc = 0
        with open(target, "wb") as out:
            for b in blobs:
                part = target.with_name(target.name + ".part")
                self.blobs.get_file(b.blob_id, part)
                data = part.read_bytes()
                part.unlink()
                crc = zlib.crc32(data, crc)
                out.write(data)
        return crc


def await_durable(blobs: BlobStoreManager, markers: Iterable[Mapping[str, Mapping[str, str]]], timeout_s: float) -> None:
    """The driver's side of the async upload: return once every blob-store marker's index exists
    (it is written last); a failed upload's `.failed` blob or the timeout raise. Changelog markers
    are durable once the synchronous snapshot has flushed them."""
    deadline = time.monotonic() + timeout_s
    indexes = [index for m in markers for index in m.get(BLOB_STORE_FACTORY, {}).values()]
    if not indexes:
        return

    def wait(index: str) -> None:
        blobs.await_blob(index, max(0.0, deadline - time.monotonic()))

    # one poll while the uploads run; they end together, so then the rest side by side: one check after another
    # cost a round trip per store (32 at factor 8) after the last upload
    wait(indexes[0])
    with ThreadPoolExecutor(AWAIT_THREADS, thread_name_prefix="await-durable") as pool:
        for done in [pool.submit(wait, index) for index in indexes[1:]]:
            done.result()
