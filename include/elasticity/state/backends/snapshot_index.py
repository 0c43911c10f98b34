"""Samza's SnapshotIndex: what one blob-store snapshot of a store holds, as JSON.

`dir-index` lists the files present (each with its blob ids, metadata and
checksum) and those removed since the previous snapshot;
`prev-snapshot-index-blob-id` chains snapshots for retention.

Written as Samza's SnapshotIndexSerde writes it (creator properties in order,
compact), with every field its constructors require: a file's metadata carries
its POSIX owner, group and permissions (`rw-r--r--`) and its creation and
modification times, so that Samza can restore a snapshot taken here. Read
leniently: unknown fields are ignored, as Samza's mixins do.
"""

from __future__ import annotations

import grp
import json
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.jobmodel.object_mapper import SerdeError


@dataclass(frozen=True)
class FileBlob:
    blob_id: str
    offset: int = 0


@dataclass(frozen=True, kw_only=True)
class FileMetadata:
    """Samza's FileMetadata: PosixFileAttributes of the file as it was uploaded."""

    creation_time_millis: int
    last_modified_time_millis: int
    size: int
    owner: str
    group: str
    permissions: str  # PosixFilePermissions.toString, e.g. rw-r--r--

    @classmethod
    def of(cls, path: Path) -> FileMetadata:
        st = path.stat()
        mtime = st.st_mtime_ns // 1_000_000
        born = getattr(st, "st_birthtime", None)  # where the file system keeps one; else Java reports the mtime too
        return cls(
            creation_time_millis=mtime if born is None else int(born * 1000),
            last_modified_time_millis=mtime,
            size=st.st_size,
            owner=_name(pwd.getpwuid, st.st_uid),
            group=_name(grp.getgrgid, st.st_gid),
            permissions=stat.filemode(st.st_mode)[1:],
        )


def _name(lookup: Any, ident: int) -> str:
    """A user's or group's name, as Java's UserPrincipal gives it (the number when it has none)."""
    try:
        return str(lookup(ident)[0])
    except KeyError:
        return str(ident)


@dataclass(frozen=True)
class FileIndex:
    file_name: str
    blobs: tuple[FileBlob, ...]
    metadata: FileMetadata
    checksum: int  # CRC-32 of the content

    @property
    def size(self) -> int:
        return self.metadata.size

    def same_file(self, name: str, size: int) -> bool:
        """Samza's test: SST files are immutable, so name and size identify one."""
        return self.file_name == name and self.size == size


@dataclass(frozen=True, kw_only=True)
class SnapshotMetadata:
    checkpoint_id: CheckpointId
    job_name: str
    job_id: str
    task_name: str
    store_name: str


@dataclass(frozen=True, kw_only=True)
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
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> SnapshotIndex:
        try:
            d = json.loads(text)
            m, di = d["snapshot-metadata"], d["dir-index"]
            if di.get("sub-dirs-present"):
                raise SerdeError("snapshot indexes with sub-directories are not supported")
            return cls(
                creation_time_millis=int(d["creation-time-millis"]),
                metadata=SnapshotMetadata(
                    checkpoint_id=CheckpointId.parse(m["checkpoint-id"]),
                    job_name=m["job-name"],
                    job_id=m["job-id"],
                    task_name=m["task-name"],
                    store_name=m["store-name"],
                ),
                files_present=tuple(_file_from_dict(f) for f in di["files-present"]),
                files_removed=tuple(_file_from_dict(f) for f in di["files-removed"]),
                prev_snapshot_index_blob_id=d.get("prev-snapshot-index-blob-id"),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise SerdeError(f"not a SnapshotIndex: {e}") from e


def _file_to_dict(f: FileIndex) -> dict[str, Any]:
    m = f.metadata
    return {
        "file-name": f.file_name,
        "blobs": [{"blob-id": b.blob_id, "offset": b.offset} for b in f.blobs],
        "file-metadata": {
            "creation-time-millis": m.creation_time_millis,
            "last-modified-time-millis": m.last_modified_time_millis,
            "size": m.size,
            "owner": m.owner,
            "group": m.group,
            "permissions": m.permissions,
        },
        "checksum": f.checksum,
    }


def _file_from_dict(d: dict[str, Any]) -> FileIndex:
    meta = d["file-metadata"]
    modified = int(meta.get("last-modified-time-millis", 0))
    return FileIndex(
        d["file-name"],
        tuple(FileBlob(b["blob-id"], int(b.get("offset", 0))) for b in d["blobs"]),
        FileMetadata(  # an index written before these fields were: blank, as it was
            creation_time_millis=int(meta.get("creation-time-millis", modified)),
            last_modified_time_millis=modified,
            size=int(meta["size"]),
            owner=str(meta.get("owner") or ""),
            group=str(meta.get("group") or ""),
            permissions=str(meta.get("permissions") or ""),
        ),
        int(d["checksum"]),
    )
