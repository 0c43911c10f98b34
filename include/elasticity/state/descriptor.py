"""What an application declares about a store: its name, its serdes, and how a
store key maps back to the input key it belongs to.

SEP-32 leaves stateful elasticity to keys that follow the input key: a store
key must be the input key itself, or a 1:1 function of it declared here, so
that a key's state lives in the virtual task that processes its records (and a
rescale can move it with them, by hashing the key like the router does).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..serdes import DESERIALIZERS, SERIALIZERS

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
    value_serde: str = "json"
    input_key: Callable[[Any], bytes] | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"store name {self.name!r} must match {_NAME.pattern} (it names folders and config keys)")
        for what, serde in (("key", self.key_serde), ("value", self.value_serde)):
            if serde not in SERIALIZERS:
                raise ValueError(f"store {self.name!r}: {what} serde {serde!r} is not one of {sorted(SERIALIZERS)}")

    def key_bytes(self, key: Any) -> bytes:
        if key is None:
            raise ValueError(f"store {self.name!r}: a key must not be None")
        return SERIALIZERS[self.key_serde](key)

    def key_from(self, raw: bytes) -> Any:
        return DESERIALIZERS[self.key_serde](raw)

    def value_bytes(self, value: Any) -> bytes:
        return SERIALIZERS[self.value_serde](value)

    def value_from(self, raw: bytes) -> Any:
        return DESERIALIZERS[self.value_serde](raw)

    def input_key_of(self, raw_key: bytes) -> bytes:
        """The input key bytes whose bucket owns this stored key."""
        return raw_key if self.input_key is None else self.input_key(self.key_from(raw_key))
