"""Samza's reading rules, re-implemented from its sources (apache/samza, branch 1.8.0), to read what
this project writes as Samza would: its serde classes with the checks of the constructors they call.

Each function names the Samza class it follows; a violation raises SamzaWouldFail with the rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class SamzaWouldFail(ValueError):
    """Samza's reader would throw here (IllegalStateException, IllegalArgumentException, ...)."""


def _check(ok: bool, rule: str) -> None:
    if not ok:
        raise SamzaWouldFail(rule)


def _blank(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


@dataclass(frozen=True, order=True)
class SSP:
    """org.apache.samza.system.SystemStreamPartition (keyBucket -1 = none)."""

    system: str
    stream: str
    partition: int
    key_bucket: int = -1


def checkpoint_id(text: Any) -> tuple[int, int]:
    """CheckpointId.deserialize: `<millis>-<nanoId>`, two longs."""
    _check(not _blank(text), "CheckpointId.deserialize: blank")
    parts = str(text).split("-")
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise SamzaWouldFail(f"CheckpointId.deserialize: {text!r}") from None


def log_key(data: bytes) -> dict[str, str]:
    """KafkaCheckpointLogKeySerde.fromBytes: a JSON map with the grouper factory, taskName and type."""
    d = json.loads(data)
    for k in ("systemstreampartition-grouper-factory", "taskName", "type"):
        _check(isinstance(d.get(k), str), f"KafkaCheckpointLogKeySerde: {k} missing")
    return d


def checkpoint_v1(data: bytes) -> dict[SSP, str | None]:
    """CheckpointV1Serde.fromBytes: SSP.toString -> {system, stream, partition, offset}, at least four keys,
    keyBucket ignored (the SSP is built from system, stream and partition)."""
    out = {}
    for entry in json.loads(data).values():
        _check(len(entry) >= 4, "CheckpointV1Serde: an entry needs at least four keys")
        for k in ("system", "stream", "partition"):
            _check(entry.get(k) is not None, f"CheckpointV1Serde: {k} must be present")
        out[SSP(entry["system"], entry["stream"], int(entry["partition"]))] = entry.get("offset")
    return out


def ssp_key(text: str) -> SSP:
    """SamzaObjectMapper.SystemStreamPartitionKeyDeserializer: split on every dot, the first three parts."""
    parts = text.split(".")
    _check(len(parts) >= 3, "SSP key: expected system.stream.partition")
    return SSP(parts[0], parts[1], int(parts[2]))


def checkpoint_v2(data: bytes) -> tuple[tuple[int, int], dict[SSP, str], dict[str, dict[str, str]]]:
    """CheckpointV2Serde.fromBytes (JsonCheckpointV2Mixin): id, input offsets by SSP key, markers; unknown fields ignored."""
    d = json.loads(data)
    markers = d.get("state-checkpoint-markers") or {}
    _check(all(isinstance(v, str) for m in markers.values() for v in m.values()), "CheckpointV2: markers are strings")
    return checkpoint_id(d.get("checkpoint-id")), {ssp_key(k): v for k, v in d["input-offsets"].items()}, markers


def ssp_object(d: Any) -> SSP:
    """SamzaObjectMapper.SystemStreamPartitionDeserializer: textValue / intValue of each field."""
    _check(isinstance(d, dict), "SSP: an object")
    _check(isinstance(d.get("system"), str) and isinstance(d.get("stream"), str), "SSP: system and stream are text")
    _check(isinstance(d.get("partition"), int), "SSP: partition is a number (intValue of text is 0)")
    bucket = d.get("keyBucket", -1)
    _check(isinstance(bucket, int), "SSP: keyBucket is a number")
    return SSP(d["system"], d["stream"], d["partition"], bucket)


def kafka_marker(text: str) -> tuple[SSP, str | None]:
    """KafkaStateCheckpointMarker.deserialize (KafkaStateCheckpointMarkerMixin)."""
    d = json.loads(text)
    _check(d.get("version") == 1, "KafkaStateCheckpointMarker: version 1")
    offset = d.get("changelog-offset")
    _check(offset is None or isinstance(offset, str), "KafkaStateCheckpointMarker: changelog-offset is a string")
    return ssp_object(d.get("changelog-ssp")), offset


def changelog_ssp_offset(text: str | None) -> tuple[tuple[int, int], str | None]:
    """KafkaChangelogSSPOffset.fromString: `<checkpointId>:<offset>`, `null` for none."""
    _check(not _blank(text), "KafkaChangelogSSPOffset: blank")
    parts = str(text).split(":")
    _check(len(parts) == 2, f"KafkaChangelogSSPOffset: {text!r}")
    return checkpoint_id(parts[0]), None if parts[1] == "null" else parts[1]


def changelog_offsets(
    checkpoint: bytes, version: int, store_changelogs: dict[str, tuple[str, str]], changelog_partition: int
) -> dict[str, tuple[SSP, str | None]]:
    """TransactionalStateTaskRestoreManager.getCheckpointedChangelogOffsets: per store, its changelog SSP and offset.
    V2: the Kafka markers; V1: the entry of SSP(store's changelog, the task's changelog partition)."""
    if version == 2:
        markers = checkpoint_v2(checkpoint)[2].get("org.apache.samza.storage.KafkaChangelogStateBackendFactory", {})
        return {store: kafka_marker(m) for store, m in markers.items()}
    offsets = checkpoint_v1(checkpoint)
    out = {}
    for store, (system, stream) in store_changelogs.items():
        ssp = SSP(system, stream, changelog_partition)
        if not _blank(offsets.get(ssp)):
            out[store] = (ssp, changelog_ssp_offset(offsets[ssp])[1])
    return out


def _file_metadata(d: Any) -> None:
    """FileMetadata's constructor: times and size >= 0; owner, group and permissions not blank."""
    _check(isinstance(d, dict), "FileIndex: file-metadata not null")
    for k in ("creation-time-millis", "last-modified-time-millis", "size"):
        _check(int(d.get(k, 0)) >= 0, f"FileMetadata: {k} >= 0")  # a missing long is 0 to Jackson
    for k in ("owner", "group", "permissions"):
        _check(not _blank(d.get(k)), f"FileMetadata: {k} not blank")


def _file_index(d: Any) -> None:
    _check(not _blank(d.get("file-name")), "FileIndex: file-name not blank")
    _check(isinstance(d.get("blobs"), list), "FileIndex: blobs not null")
    for b in d["blobs"]:
        _check(not _blank(b.get("blob-id")) and int(b.get("offset", 0)) >= 0, "FileBlob: blob-id not blank, offset >= 0")
    _file_metadata(d.get("file-metadata"))
    _check(isinstance(d.get("checksum", 0), int), "FileIndex: checksum is a long")


def _dir_index(d: Any) -> None:
    _check(isinstance(d, dict) and isinstance(d.get("dir-name"), str), "DirIndex: dir-name not null")
    for k in ("files-present", "files-removed", "sub-dirs-present", "sub-dirs-removed"):
        _check(isinstance(d.get(k), list), f"DirIndex: {k} not null")
    present = {f["file-name"] for f in d["files-present"]}
    _check(not present & {f["file-name"] for f in d["files-removed"]}, "DirIndex: a file both present and removed")
    for f in d["files-present"] + d["files-removed"]:
        _file_index(f)
    for sub in d["sub-dirs-present"] + d["sub-dirs-removed"]:
        _dir_index(sub)


def snapshot_index(data: bytes) -> dict[str, Any]:
    """SnapshotIndexSerde.fromBytes with the checks of SnapshotIndex, SnapshotMetadata, DirIndex, FileIndex,
    FileMetadata and FileBlob's constructors."""
    d = json.loads(data)
    _check(int(d.get("creation-time-millis", 0)) >= 0, "SnapshotIndex: creation-time-millis >= 0")
    m = d.get("snapshot-metadata")
    _check(isinstance(m, dict), "SnapshotIndex: snapshot-metadata not null")
    checkpoint_id(m.get("checkpoint-id"))
    for k in ("job-name", "job-id", "task-name", "store-name"):
        _check(not _blank(m.get(k)), f"SnapshotMetadata: {k} not blank")
    _dir_index(d.get("dir-index"))
    prev = d.get("prev-snapshot-index-blob-id")
    _check(prev is None or not _blank(prev), "SnapshotIndex: prev-snapshot-index-blob-id not blank when present")
    return d
