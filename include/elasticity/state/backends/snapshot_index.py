"""Samza's SnapshotIndex: what one blob-store snapshot of a store holds, as JSON.

`dir-index` lists the files present (each with its blob ids, metadata and
checksum) and those removed since the previous snapshot;
`prev-snapshot-index-blob-id` chains snapshots for retention.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.jobmodel.object_mapper import SerdeError


@dataclass(frozen=True)
class FileBlob:
    blob_id: str
    offset: int = 0


@dataclass(frozen=True)
class FileIndex:
    file_name: str
    blobs: tuple[FileBlob, ...]
    size: int
    mtime_millis: int
    checksum: int  # CRC-32 of the content

    def same_file(self, name: str, size: int) -> bool:
        """Samza's test: SST files are immutable, so name and size identify one."""
        return self.file_name == name and self.size == size


@dataclass(frozen=True)
class SnapshotMetadata:
    checkpoint_id: CheckpointId
    job_name: str
    job_id: str
    task_name: str
    store_name: str


@dataclass(frozen=True)
class SnapshotIndex:
    creation_time_millis: int
    metadata: SnapshotMetadata
    files_present: tuple[FileIndex, ...]
    files_removed: tuple[FileIndex, ...]
    prev_snapshot_index_blob_id: str | None

    def blob_ids(self) -> set[str]:
        return {b.blob_id for f in self.files_present for b in f.blobs}

    def to_json(self) -> str:
        m = self.metadata
        return json.dumps(
            {
                "creation-time-millis": self.creation_time_millis,
                "snapshot-metadata": {
                    "checkpoint-id": str(m.checkpoint_id),
                    "job-name": m.job_name,
                    "job-id": m.job_id,
                    "task-name": m.task_name,
                    "store-name": m.store_name,
                },
                "dir-index": {
                    "dir-name": "",
                    "files-present": [_file_to_dict(f) for f in self.files_present],
                    "files-removed": [_file_to_dict(f) for f in self.files_removed],
                    "sub-dirs-present": [],
                    "sub-dirs-removed": [],
                },
                "prev-snapshot-index-blob-id": self.prev_snapshot_index_blob_id,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> SnapshotIndex:
        try:
            d = json.loads(text)
            m, di = d["snapshot-metadata"], d["dir-index"]
            if di.get("sub-dirs-present"):
                raise SerdeError("snapshot indexes with sub-directories are not supported")
            return cls(
                int(d["creation-time-millis"]),
                SnapshotMetadata(
                    CheckpointId.parse(m["checkpoint-id"]), m["job-name"], m["job-id"], m["task-name"], m["store-name"]
                ),
                tuple(_file_from_dict(f) for f in di["files-present"]),
                tuple(_file_from_dict(f) for f in di["files-removed"]),
                d.get("prev-snapshot-index-blob-id"),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise SerdeError(f"not a SnapshotIndex: {e}") from e


def _file_to_dict(f: FileIndex) -> dict[str, Any]:
    return {
        "file-name": f.file_name,
        "blobs": [{"blob-id": b.blob_id, "offset": b.offset} for b in f.blobs],
        "file-metadata": {"creation-time-millis": f.mtime_millis, "last-modified-time-millis": f.mtime_millis, "size": f.size},
        "checksum": f.checksum,
    }


def _file_from_dict(d: dict[str, Any]) -> FileIndex:
    meta = d["file-metadata"]
    return FileIndex(
        d["file-name"],
        tuple(FileBlob(b["blob-id"], int(b.get("offset", 0))) for b in d["blobs"]),
        int(meta["size"]),
        int(meta.get("last-modified-time-millis", 0)),
        int(d["checksum"]),
    )
