"""The Kafka changelog's state markers in Samza's two forms, byte for byte.

CheckpointV2 carries Samza's KafkaStateCheckpointMarker, a JSON string written by
SamzaObjectMapper: `{"version":1,"changelog-ssp":{...},"changelog-offset":"<o>"}`,
creator properties in order, the SSP a Java HashMap (so `system, partition,
stream, keyBucket`), compact. CheckpointV1 has no markers: Samza's TaskInstance
puts each store's changelog SSP among the input offsets with the value
KafkaChangelogSSPOffset, `<checkpointId>:<offset>` (`null` for an empty
changelog). The offset is the newest changelog record in the state, inclusive.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.jobmodel.object_mapper import SerdeError, ssp_from_dict

_COMPACT = (",", ":")


@dataclass(frozen=True)
class KafkaChangelogMarker:
    """Samza's KafkaStateCheckpointMarker: the changelog SSP and its newest offset in the state (inclusive)."""

    ssp: SystemStreamPartition
    offset: int | None  # None: nothing written yet

    def to_json(self) -> str:
        # SamzaObjectMapper's SSP serializer fills a HashMap: its iteration order for these four names
        ssp = {
            "system": self.ssp.system,
            "partition": self.ssp.partition,
            "stream": self.ssp.stream,
            "keyBucket": self.ssp.key_bucket,
        }
        offset = None if self.offset is None else str(self.offset)
        return json.dumps({"version": 1, "changelog-ssp": ssp, "changelog-offset": offset}, separators=_COMPACT)

    @classmethod
    def from_json(cls, text: str) -> KafkaChangelogMarker:
        try:
            d = json.loads(text)
            if d.get("version") != 1:
                raise SerdeError(f"unsupported changelog marker version {d.get('version')!r}")
            offset = d.get("changelog-offset")
            return cls(ssp_from_dict(d["changelog-ssp"]), None if offset is None else int(offset))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise SerdeError(f"not a Kafka changelog marker: {text!r} ({e})") from e


@dataclass(frozen=True)
class ChangelogSSPOffset:
    """Samza's KafkaChangelogSSPOffset: a changelog entry of a CheckpointV1, `<checkpointId>:<offset>`."""

    checkpoint_id: CheckpointId
    offset: int | None

    def __str__(self) -> str:
        return f"{self.checkpoint_id}:{'null' if self.offset is None else self.offset}"

    @classmethod
    def parse(cls, text: str) -> ChangelogSSPOffset:
        parts = (text or "").split(":")
        try:
            if len(parts) != 2:
                raise ValueError("expected '<checkpointId>:<offset>'")
            return cls(CheckpointId.parse(parts[0]), None if parts[1] == "null" else int(parts[1]))
        except ValueError as e:
            raise SerdeError(f"changelog offset {text!r} is not Samza's '<checkpointId>:<offset>' ({e})") from None

    @staticmethod
    def looks_like(text: str | None) -> bool:
        """A V1 value of this form (an input offset is a bare integer)."""
        return text is not None and ":" in text
