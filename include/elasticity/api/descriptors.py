"""What an application declares about a store: its name, its serdes, and how a
store key maps back to the input key it belongs to.

SEP-32 leaves stateful elasticity to keys that follow the input key: a store
key must be the input key itself, or a 1:1 function of it declared here, so
that a key's state lives in the virtual task that processes its records (and a
rescale can move it with them, by hashing the key like the router does).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from elasticity.serializers import DESERIALIZERS, SERIALIZERS, Serde, deserialize, serialize

_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")


@dataclass(frozen=True)
class StoreDescriptor:
    """A named key-value store (Samza's `StoreDescriptor`), declared by an app.

    `input_key`, when given, returns the input record's key bytes for a store
    key; without it the store key, serialised with `key_serde`, *is* the input
    key (the default, and the only form a rescale can split without the app).
    """

    name: str
    key_serde: str = "string"
    value_serde: Serde = "json"  # a registered serde (stores.<store>.msg.serde) only through the job's config
    input_key: Callable[[Any], bytes] | None = None
    _: KW_ONLY
    value_topic: str | None = None  # with a registered value serde: the topic its subject is named after (the changelog)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"store name {self.name!r} must match {_NAME.pattern} (it names folders and config keys)")
        for what, serde in (("key", self.key_serde), ("value", self.value_serde)):
            if isinstance(serde, str) and serde not in SERIALIZERS or not isinstance(serde, str) and what == "key":
                raise ValueError(f"store {self.name!r}: {what} serde {serde!r} is not one of {sorted(SERIALIZERS)}")

    def key_bytes(self, key: Any) -> bytes:
        if key is None:
            raise ValueError(f"store {self.name!r}: a key must not be None")
        return SERIALIZERS[self.key_serde](key)

    def key_from(self, raw: bytes) -> Any:
        return DESERIALIZERS[self.key_serde](raw)

    def value_bytes(self, value: Any) -> bytes:
        if isinstance(self.value_serde, str):
            return SERIALIZERS[self.value_serde](value)
        out = serialize(self.value_serde, value, self.value_topic or self.name)
        assert out is not None  # a None value is a delete, never written
        return out

    def value_from(self, raw: bytes) -> Any:
        if isinstance(self.value_serde, str):
            return DESERIALIZERS[self.value_serde](raw)
        return deserialize(self.value_serde, raw, f"store {self.name!r} value")

    def input_key_of(self, raw_key: bytes) -> bytes:
        """The input key bytes whose bucket owns this stored key."""
        return raw_key if self.input_key is None else self.input_key(self.key_from(raw_key))


@dataclass(frozen=True)
class TableDescriptor:
    """A read-only table fed by side inputs (Samza's TableDescriptor with `withSideInputs` and
    `withSideInputsProcessor`), for stream-table joins.

    `side_inputs` are compacted topics (`system.stream`), read whole: the table is
    replicated, every container holds all of it, so a rescale has nothing to move.
    `processor(message)` (Samza's SideInputsProcessor) turns a side-input record into
    (key, value) entries, a None value deleting; without it the record's key and value
    are the entry. It must depend on the record alone: a replay re-applies records.
    The config keys `stores.<name>.side.inputs` and
    `stores.<name>.side.inputs.processor.factory` override both.
    """

    name: str
    _: KW_ONLY
    side_inputs: tuple[str, ...] = ()
    key_serde: str = "string"
    value_serde: str = "json"
    processor: Callable[[Any], Iterable[tuple[Any, Any]]] | None = None

    def __post_init__(self) -> None:
        StoreDescriptor(self.name, self.key_serde, self.value_serde)  # the same rules for names and serdes
        object.__setattr__(self, "side_inputs", tuple(self.side_inputs))
