"""Confluent's wire format: a magic byte (0), the schema's registry id as a 4-byte big-endian integer, then the
encoded record. What the Schema Registry serdes of Kafka's Java and Python clients write and read, so a topic
written by either is read here and the other way round."""

from __future__ import annotations

import struct

from elasticity.serializers import RecordSerdeError

MAGIC = 0
HEADER = struct.Struct(">bI")
MAX_ID = 2**31 - 1  # the registry's ids are Java ints


def frame(schema_id: int, payload: bytes) -> bytes:
    """`payload` behind the header naming `schema_id`."""
    if not 0 <= schema_id <= MAX_ID:
        raise ValueError(f"schema id {schema_id} is not in 0..{MAX_ID}")
    return HEADER.pack(MAGIC, schema_id) + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    """(schema id, payload) of a framed record; a record that is not framed so is the record's fault."""
    if len(data) < HEADER.size:
        raise RecordSerdeError(f"{len(data)} bytes: shorter than the wire format's {HEADER.size}-byte header")
    magic, schema_id = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise RecordSerdeError(f"bad magic byte {data[0]:#04x} (Confluent's wire format starts with {MAGIC:#04x})")
    return schema_id, bytes(data[HEADER.size :])
