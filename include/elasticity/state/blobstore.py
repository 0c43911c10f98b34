"""Blob-store state backend (Samza's BlobStoreStateBackendFactory): incremental
snapshots of a store's RocksDB checkpoint.

Upload sends only the files that the previous snapshot lacks (an SST file with
the same name and size is the same immutable file; the small CURRENT, MANIFEST
and OPTIONS files go every time), then a SnapshotIndex blob; the marker is the index's
blob id. Everything of a (virtual task, store) lives under one prefix, so after
a checkpoint is written `cleanup` keeps the blobs of the last
`stores.<s>.blob.retain` snapshots and deletes the rest: older snapshots and
whatever failed or crashed uploads left (Samza expires those with a TTL).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from urllib.parse import quote

from .. import faults
from ..checkpoint.model import CheckpointId
from ..config import BLOB_STORE_FACTORY
from .backend import StateBackend, StoreContext
from .blobs import BlobStore
from .rocksdb import snapshot_files
from .snapshot_index import FileBlob, FileIndex, SnapshotIndex, SnapshotMetadata


class ChecksumMismatch(OSError):
    pass


class BlobStoreStateBackend(StateBackend):
    factory = BLOB_STORE_FACTORY

    def __init__(self, context: StoreContext, blobs: BlobStore) -> None:
        super().__init__(context)
        self.blobs = blobs
        c = context
        self.prefix = f"{quote(c.job_name, safe='-_.')}-{quote(c.job_id, safe='-_.')}/{quote(c.task.name, safe='-_.')}/{c.name}/"
        self.previous: tuple[str, SnapshotIndex] | None = None  # the base of the next incremental upload

    def read_index(self, blob_id: str) -> SnapshotIndex:
        return SnapshotIndex.from_json(self.blobs.get_bytes(blob_id).decode())

    def init(self, marker: str | None, store) -> None:
        self.previous = (marker, self.read_index(marker)) if marker else None

    def upload(self, checkpoint_id: CheckpointId, folder: Path, pending: str | None) -> str:
        known = {f.file_name: f for f in self.previous[1].files_present} if self.previous else {}
        present, uploaded = [], 0
        for path in snapshot_files(folder):
            st = path.stat()
            old = known.get(path.name)
            if old is not None and path.suffix == ".sst" and old.same_file(path.name, st.st_size):  # others are rewritten in place
                present.append(old)
                continue
            blob_id = f"{self.prefix}files/{uuid.uuid4().hex}-{path.name}"
            crc = self.blobs.put_file(path, blob_id)
            faults.point("state.blob.file_uploaded")
            uploaded += st.st_size
            present.append(FileIndex(path.name, (FileBlob(blob_id),), st.st_size, int(st.st_mtime * 1000), crc))
        names = {f.file_name for f in present}
        c = self.context
        index = SnapshotIndex(
            int(time.time() * 1000),
            SnapshotMetadata(checkpoint_id, c.job_name, c.job_id, c.task.name, c.name),
            tuple(present),
            tuple(f for n, f in sorted(known.items()) if n not in names),
            self.previous[0] if self.previous else None,
        )
        index_id = f"{self.prefix}index/{checkpoint_id}-{uuid.uuid4().hex[:8]}.json"
        data = index.to_json().encode()
        self.blobs.put_bytes(index_id, data)
        faults.point("state.blob.index_uploaded")
        self.previous = (index_id, index)
        self.bytes_uploaded = uploaded + len(data)
        return index_id

    def cleanup(self, marker: str) -> None:
        """Keep the snapshots chained from the committed one, up to the retention; delete every other blob."""
        keep: set[str] = set()
        blob_id: str | None = marker
        for _ in range(self.context.config.blob_retain):
            if blob_id is None:
                break
            try:
                index = self.read_index(blob_id)
            except FileNotFoundError:
                break
            keep |= index.blob_ids() | {blob_id}
            blob_id = index.prev_snapshot_index_blob_id
        for found in self.blobs.list(self.prefix):
            if found not in keep:
                self.blobs.delete(found)
                faults.point("state.blob.deleted")

    def restore(self, marker: str | None, folder: Path) -> str | None:
        if marker is None:
            raise ValueError(f"store {self.context.name!r}: the blob store restores only from a snapshot index")
        index = self.read_index(marker)
        folder.mkdir(parents=True)
        for f in index.files_present:
            crc = self.blobs.get_file(f.blobs[0].blob_id, folder / f.file_name)
            if crc != f.checksum:
                raise ChecksumMismatch(f"store {self.context.name!r}: {f.file_name} from {f.blobs[0].blob_id} has a bad checksum")
        return marker
