"""Samza-compatible checkpoint JSON, and the checkpoint log key, byte for byte as
Samza's Jackson mappers write them (compact JSON).

V1 (CheckpointV1Serde): `{"<SSP.toString()>": {"system", "stream", "partition", "offset"}}`,
all strings; only a bucketed SSP adds `keyBucket` (and a 4-part toString).
V2 (SamzaObjectMapper + JsonCheckpointV2Mixin): `version` (Jackson writes the
getter), `checkpoint-id`, `input-offsets` keyed `system.stream.partition`, plus
`.keyBucket` only for a bucketed SSP, and `state-checkpoint-markers` (backend
factory -> store -> marker). Readers take 3- and 4-part forms, with or without
`keyBucket`, and ignore unknown fields, as Samza's do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV1, CheckpointV2, Watermark
from elasticity.jobmodel.model import NO_KEY_BUCKET, SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import SerdeError, ssp_from_key, ssp_to_key

_COMPACT = (",", ":")
V1_TYPE = "checkpoint"
V2_TYPE = "checkpoint-v2"


def checkpoint_key(task_name: TaskName, grouper_factory: str, version: int) -> str:
    """The key Samza writes with each checkpoint message."""
    return json.dumps(
        {
            "systemstreampartition-grouper-factory": grouper_factory,
            "taskName": task_name.name,
            "type": V1_TYPE if version == 1 else V2_TYPE,
        },
        separators=_COMPACT,
    )


class UnknownCheckpointType(SerdeError):
    """A key type this version does not know (Samza skips those, for forward compatibility)."""


def parse_checkpoint_key(text: str) -> tuple[TaskName, str, int]:
    """(task, grouper factory, version) of a checkpoint log key."""
    try:
        d = json.loads(text)
        task, factory, kind = d["taskName"], d["systemstreampartition-grouper-factory"], d["type"]
    except (ValueError, KeyError, TypeError) as e:
        raise SerdeError(f"not a Samza checkpoint key: {text!r}") from e
    types = {V1_TYPE: 1, V2_TYPE: 2}
    if kind not in types:
        raise UnknownCheckpointType(f"checkpoint key type {kind!r} is not one of {sorted(types)}")
    return TaskName(task), factory, types[kind]


def v1_to_json(cp: CheckpointV1) -> str:
    out = {}
    for ssp, offset in sorted(cp.offsets.items()):
        entry = {"system": ssp.system, "stream": ssp.stream, "partition": str(ssp.partition), "offset": offset}
        if ssp.has_key_bucket:
            entry["keyBucket"] = str(ssp.key_bucket)
        out[str(ssp)] = entry
    return json.dumps(out, sort_keys=True, separators=_COMPACT)


def v1_from_json(text: str) -> CheckpointV1:
    offsets = {}
    for entry in json.loads(text).values():
        try:
            ssp = SystemStreamPartition(
                entry["system"], entry["stream"], int(entry["partition"]), int(entry.get("keyBucket", NO_KEY_BUCKET))
            )
        except (KeyError, TypeError, ValueError) as e:
            raise SerdeError(f"not a CheckpointV1 entry: {entry!r}") from e
        offsets[ssp] = entry.get("offset")
    return CheckpointV1(offsets)


def v2_to_json(cp: CheckpointV2) -> str:
    return json.dumps(
        {
            "version": CheckpointV2.version,
            "checkpoint-id": str(cp.checkpoint_id),
            "input-offsets": {ssp_to_key(s): o for s, o in sorted(cp.input_offsets.items())},
            "state-checkpoint-markers": {k: dict(v) for k, v in cp.state_checkpoint_markers.items()},
        },
        separators=_COMPACT,
    )


def v2_from_json(text: str) -> CheckpointV2:
    d: dict[str, Any] = json.loads(text)
    try:
        return CheckpointV2(
            CheckpointId.parse(d["checkpoint-id"]),
            {ssp_from_key(k): str(v) for k, v in d["input-offsets"].items()},
            {str(k): {str(s): str(m) for s, m in v.items()} for k, v in (d.get("state-checkpoint-markers") or {}).items()},
        )
    except (KeyError, AttributeError, ValueError) as e:
        raise SerdeError(f"not a CheckpointV2: {e}") from e


def watermarks_to_json(watermarks: Mapping[SystemStreamPartition, tuple[Watermark, ...]]) -> str:
    return json.dumps(
        {ssp_to_key(s): [[w.factor, w.bucket, w.offset] for w in wms] for s, wms in sorted(watermarks.items()) if wms},
        sort_keys=True,
    )


def watermarks_from_json(text: str | None) -> dict[SystemStreamPartition, tuple[Watermark, ...]]:
    if not text:
        return {}
    return {ssp_from_key(k): tuple(Watermark(int(f), int(b), int(o)) for f, b, o in v) for k, v in json.loads(text).items()}
