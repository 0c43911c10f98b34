"""Samza-compatible checkpoint JSON, and the checkpoint log key, as Samza's Jackson
mappers write them (compact JSON).

V1 (CheckpointV1Serde): `{"<SSP.toString()>": {"system", "stream", "partition", "offset"}}`,
all strings; only a bucketed SSP adds `keyBucket` (and a 4-part toString).
V2 (SamzaObjectMapper + JsonCheckpointV2Mixin): `checkpoint-id`, `input-offsets`
keyed `system.stream.partition`, plus `.keyBucket` only for a bucketed SSP,
`state-checkpoint-markers` (backend factory -> store -> marker), then `version`
(Jackson writes the creator's properties first, then the getter). Readers take
3- and 4-part forms, with or without `keyBucket`, and ignore unknown fields, as
Samza's do.

Samza's maps are Java HashMaps, so their entries come out in bucket order of the
keys' Java hash codes; `_java_order` replays that, which makes the bytes equal to
Samza's whenever no two keys share a bucket (else Samza's own insertion order,
which no reader depends on, decides between them).
"""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=1 << 16)
def _string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as an unsigned 32-bit value; the same few names (streams,
    systems, the entries' field names) come back for every task of every commit."""
    h = 0
    if text.isascii():  # one code unit per character
        for ch in text:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return h
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _ssp_hash(ssp: SystemStreamPartition) -> int:
    """SystemStreamPartition.hashCode: SystemStream's (stream, system), then partition and keyBucket."""
    h = 31 * (31 + _string_hash(ssp.stream)) + _string_hash(ssp.system)
    h = 31 * h + ssp.partition
    return (31 * h + (ssp.key_bucket if ssp.has_key_bucket else 0)) & 0xFFFFFFFF


def _java_order(items: list[tuple[Any, Any]], hash_of: Any = _string_hash, capacity: int = 16) -> dict[Any, Any]:
    """`items` (in insertion order) as a java.util.HashMap built with `capacity` iterates them."""
    return dict(items[i] for i in _hash_map_order(tuple(k for k, _ in items), hash_of, capacity))


@functools.lru_cache(maxsize=1 << 14)
def _hash_map_order(keys: tuple[Any, ...], hash_of: Any, capacity: int) -> tuple[int, ...]:
    """The positions of `keys` in a java.util.HashMap's iteration order: it depends on the keys alone, and a
    commit writes the same keys (entry fields, a task's SSPs) for every task, batch after batch."""
    if len(keys) < 2:  # a virtual task of one SSPKb: no order to find
        return tuple(range(len(keys)))
    size = 1
    while size < capacity:
        size *= 2
    while len(keys) > int(size * 0.75):
        size *= 2

    def bucket(i: int) -> tuple[int, int]:
        h = hash_of(keys[i])
        return (h ^ (h >> 16)) & (size - 1), i

    return tuple(sorted(range(len(keys)), key=bucket))


def _v1_entry(ssp: SystemStreamPartition, offset: str | None) -> dict[str, str | None]:
    entry: list[tuple[str, str | None]] = [("system", ssp.system), ("stream", ssp.stream), ("partition", str(ssp.partition))]
    if ssp.has_key_bucket:
        entry.append(("keyBucket", str(ssp.key_bucket)))
    return _java_order([*entry, ("offset", offset)], capacity=4)


def v1_to_json(cp: CheckpointV1) -> str:
    items = [(str(ssp), _v1_entry(ssp, offset)) for ssp, offset in sorted(cp.offsets.items())]
    return json.dumps(_java_order(items, capacity=len(items)), separators=_COMPACT)


@functools.lru_cache(maxsize=1 << 16)
def _offsets_template(ssps: tuple[SystemStreamPartition, ...], version: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The JSON of a checkpoint over `ssps` (sorted) as the text between its offsets, and which SSP each offset is
    of, for `offsets_json`: the JSON's shape depends on the SSPs alone, and a commit writes the same task's SSPs
    batch after batch. Built as `v1_to_json` and `v2_to_json` build theirs, entry by entry in Java's order."""
    cuts: list[str] = []
    text = "{"
    if version == 1:
        keys = [str(s) for s in ssps]
        order = _hash_map_order(tuple(keys), _string_hash, len(ssps))
        for n, i in enumerate(order):
            head, tail = _v1_entry_cut(ssps[i])
            cuts.append(f"{text}{',' if n else ''}{_dump(keys[i])}:{head}")
            text = tail
    else:
        order = _hash_map_order(ssps, _ssp_hash, 16)
        for n, i in enumerate(order):
            cuts.append(f"{text}{',' if n else ''}{json.dumps(ssp_to_key(ssps[i]))}:")
            text = ""
    return (*cuts, text + "}"), order


@functools.lru_cache(maxsize=256)
def _dump(text: str) -> str:
    return json.dumps(text)


def _v1_entry_cut(ssp: SystemStreamPartition) -> tuple[str, str]:
    """A CheckpointV1 entry's JSON before and after its offset (`_v1_entry`'s fields in its order)."""
    values = {"system": _dump(ssp.system), "stream": _dump(ssp.stream), "partition": f'"{ssp.partition}"'}
    if ssp.has_key_bucket:
        values["keyBucket"] = f'"{ssp.key_bucket}"'
    fields = _v1_fields(tuple(values))
    at = fields.index("offset")
    head = ",".join(f'"{f}":{values[f]}' for f in fields[:at])
    tail = ",".join(f'"{f}":{values[f]}' for f in fields[at + 1 :])
    return "{" + head + ("," if head else "") + '"offset":', ("," if tail else "") + tail + "}"


@functools.lru_cache(maxsize=4)
def _v1_fields(names: tuple[str, ...]) -> tuple[str, ...]:
    """The order of a CheckpointV1 entry's fields (`_v1_entry`: a HashMap of capacity 4)."""
    return tuple(_java_order([(f, None) for f in (*names, "offset")], capacity=4))


def offsets_json(offsets: Mapping[SystemStreamPartition, int], version: int) -> str:
    """A checkpoint's offsets as CheckpointV1's JSON (version 1) or CheckpointV2's `input-offsets` object (2), the
    same text as `v1_to_json` and `v2_to_json` write, from a template per set of SSPs."""
    if len(offsets) == 1:  # a virtual task of one SSPKb, the most common: thousands a commit
        ((ssp, offset),) = offsets.items()
        head, tail = _offsets_template((ssp,), version)[0]
        return f'{head}"{offset}"{tail}'
    ssps = tuple(sorted(offsets))
    pieces, takes = _offsets_template(ssps, version)
    return "".join(f'{p}"{offsets[ssps[i]]}"' for p, i in zip(pieces, takes, strict=False)) + pieces[-1]


def v2_json(
    checkpoint_id: CheckpointId, offsets: Mapping[SystemStreamPartition, int], markers: Mapping[str, Mapping[str, str]]
) -> str:
    """`v2_to_json` of a task checkpoint's offsets, its input offsets from a template (`offsets_json`)."""
    return f'{{"checkpoint-id":"{checkpoint_id}","input-offsets":{offsets_json(offsets, 2)},{_v2_tail(markers) if markers else _V2_TAIL}'


def _v2_tail(markers: Mapping[str, Mapping[str, str]]) -> str:
    ordered = [(f, _java_order(sorted(m.items()))) for f, m in sorted(markers.items())]
    tail = {"state-checkpoint-markers": _java_order(ordered), "version": CheckpointV2.version}
    return json.dumps(tail, separators=_COMPACT)[1:]


_V2_TAIL = _v2_tail({})  # a stateless task's: no markers


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
    offsets = _java_order(sorted(cp.input_offsets.items()), _ssp_hash)
    markers = [(f, _java_order(sorted(m.items()))) for f, m in sorted(cp.state_checkpoint_markers.items())]
    return json.dumps(
        {
            "checkpoint-id": str(cp.checkpoint_id),
            "input-offsets": {ssp_to_key(s): o for s, o in offsets.items()},
            "state-checkpoint-markers": _java_order(markers),
            "version": CheckpointV2.version,
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
