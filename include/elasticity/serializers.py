"""Key and message serdes (Samza's `systems.<s>.samza.key.serde` / `.msg.serde`).

A record whose key or value does not decode is not dropped: the engine sends it
to the dead-letter sink with the error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


class RecordSerdeError(ValueError):
    """A key or value its serde cannot read or write: the record goes to the dead-letter sink."""


def _string_from(b: bytes) -> str:
    return b.decode("utf-8")


def _json_from(b: bytes) -> Any:
    return json.loads(b)


def _bytes(b: bytes) -> bytes:
    return b


def _string_to(v: Any) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else str(v).encode("utf-8")


def _json_to(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":"), sort_keys=True, default=str).encode("utf-8")


def _bytes_to(v: Any) -> bytes:
    if isinstance(v, bytes | bytearray):
        return bytes(v)
    raise RecordSerdeError(f"byte serde needs bytes, got {type(v).__name__}")


DESERIALIZERS: dict[str, Callable[[bytes], Any]] = {"string": _string_from, "json": _json_from, "byte": _bytes}
SERIALIZERS: dict[str, Callable[[Any], bytes]] = {"string": _string_to, "json": _json_to, "byte": _bytes_to}


def deserialize(serde: str, raw: bytes | None, what: str) -> Any:
    if raw is None:
        return None
    try:
        return DESERIALIZERS[serde](raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise RecordSerdeError(f"{what} is not valid {serde}: {e}") from e


def serialize(serde: str, value: Any) -> bytes | None:
    if value is None:
        return None
    return SERIALIZERS[serde](value)
