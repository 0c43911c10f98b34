"""Records a Kafka broker refuses for what they are, not for a passing state: sending them again never helps.

A record larger than the topic's `max.message.bytes` (or the broker's `message.max.bytes`), a batch of records
larger than that, a record that fails the broker's validation (a keyless record on a compacted topic) or one
that arrives corrupt is refused with one of these error codes, by librdkafka and kafka-python alike (their
numbers are Kafka's protocol error codes). The broker refuses a whole record batch at once, so a refusal of a
record sent among others says only that its batch was refused: `decided` tells whose refusal it is.
"""

from __future__ import annotations

from dataclasses import dataclass

REFUSALS = {  # Kafka's protocol error code -> its name in the protocol
    2: "CORRUPT_MESSAGE",
    10: "MESSAGE_TOO_LARGE",
    18: "RECORD_LIST_TOO_LARGE",
    87: "INVALID_RECORD",
}


def refusal(code: int, text: str) -> str | None:
    """The broker's reason when `code` refuses the record itself (`text`: the client's words for it), else None:
    a passing error (a leader moving, a timeout), which a retry may cure."""
    name = REFUSALS.get(code)
    if name is None:
        return None
    return name if not text or text == name else f"{name} ({text})"


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """One output record the broker refused: which one (`index` among those sent together), where it was going,
    and why; `alone`: it was refused in a batch of its own (or by the client before any batch), so the refusal
    is its own, not a neighbour's."""

    index: int
    topic: str
    partition: int  # -1 when the client refused it before it had one
    reason: str
    alone: bool

    def describe(self, system: str) -> str:
        return refused_output(f"{system}.{self.topic}", self.partition, self.reason)


def refused_output(stream: str, partition: int, reason: str) -> str:
    """The dead letter's error, and the failed batch's, for an output record the broker refused."""
    where = f"partition {partition}" if partition >= 0 else "before it had a partition"
    return f"output {stream} {where} refused by the broker: {reason}"


def decided(refusals: list[Refusal], alone: set[int]) -> tuple[list[Refusal], set[int]]:
    """Of a round's refusals, those that are the record's own (refused alone), and the indices to send alone next
    time (refused among others: maybe for a neighbour). Each round thus decides a record or isolates one, so
    sending again with these ends after at most twice as many rounds as records."""
    own = [r for r in refusals if r.alone or r.index in alone]
    return own, alone | {r.index for r in refusals if not (r.alone or r.index in alone)}
