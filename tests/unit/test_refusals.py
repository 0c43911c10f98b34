"""Records the broker refuses for themselves: told apart from passing errors, named in the dead letter's error,
and found among the records of a refused batch in a bounded number of rounds."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from elasticity.batch.sinks.exactly_once import StagedBatches
from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA
from elasticity.kafka.refusals import Refusal, decided, refusal, refused_output


def test_a_refusal_is_the_records_own_kind_of_error_and_names_the_brokers_reason():
    assert refusal(10, "Broker: Message size too large") == "MESSAGE_TOO_LARGE (Broker: Message size too large)"
    assert refusal(87, "InvalidRecordError") == "INVALID_RECORD (InvalidRecordError)"
    assert refusal(18, "") == "RECORD_LIST_TOO_LARGE"
    assert refusal(2, "CORRUPT_MESSAGE") == "CORRUPT_MESSAGE"
    for passing in (6, 7, 15, 45, -185):  # not a leader, a timeout, no coordinator, out of order, a local timeout
        assert refusal(passing, "whatever") is None  # a retry may cure these: never dead-lettered


def test_the_error_names_the_output_stream_its_partition_and_the_reason():
    assert refused_output("kafka.enriched", 3, "MESSAGE_TOO_LARGE") == (
        "output kafka.enriched partition 3 refused by the broker: MESSAGE_TOO_LARGE"
    )
    r = Refusal(index=0, topic="enriched", partition=-1, reason="MESSAGE_TOO_LARGE", alone=True)
    assert r.describe("kafka") == "output kafka.enriched before it had a partition refused by the broker: MESSAGE_TOO_LARGE"


def _refused(index: int, alone: bool = False) -> Refusal:
    return Refusal(index=index, topic="t", partition=0, reason="MESSAGE_TOO_LARGE", alone=alone)


def test_a_refusal_among_others_isolates_the_records_and_one_alone_decides():
    own, alone = decided([_refused(1), _refused(2), _refused(3)], set())
    assert own == [] and alone == {1, 2, 3}  # a batch refused: maybe for one of them only
    own, alone = decided([_refused(2)], alone)
    assert [r.index for r in own] == [2] and alone == {1, 2, 3}
    own, alone = decided([_refused(7, alone=True)], alone)  # refused by the client before any batch
    assert [r.index for r in own] == [7] and alone == {1, 2, 3}


@given(
    st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)), st.integers(1, 6))),
)
def test_sending_again_as_decided_finds_exactly_the_refused_records_within_twice_as_many_rounds(case):
    """A broker that refuses a batch holding any too-large record, batches `batch` records at a time: whatever
    the records, the rounds end with exactly the too-large ones refused, in at most 2n + 1 rounds."""
    n, too_large, batch = case
    refused: set[int] = set()
    alone: set[int] = set()
    rounds = 0
    while True:
        rounds += 1
        assert rounds <= 2 * n + 1
        sent = [i for i in range(n) if i not in refused and i not in alone]
        batches = [sent[k : k + batch] for k in range(0, len(sent), batch)]
        batches += [[i] for i in sorted(alone - refused)]
        refusals = [_refused(i) for b in batches if too_large & set(b) for i in b]
        if not refusals:
            break
        own, alone = decided(refusals, alone)
        refused |= {r.index for r in own}
    assert refused == too_large


def test_the_commit_record_counts_every_staged_output_but_the_refused():
    def staged(batch: int, n: int) -> pa.Table:
        rows = [(b"k", b"v", "Partition_0-0-2", batch, i, 0, i, "kafka", "orders", 1) for i in range(n)]
        return pa.Table.from_pylist([dict(zip(OUTPUT_SCHEMA.names, r, strict=True)) for r in rows], schema=OUTPUT_SCHEMA)

    batches = StagedBatches([("a", staged(1, 3)), ("b", staged(1, 2)), ("a", staged(2, 2))])
    assert batches.counts([1, 2]) == {1: {"a": 3, "b": 2}, 2: {"a": 2}}
    assert [r.topic for r in batches.records()] == ["a"] * 3 + ["b"] * 2 + ["a"] * 2  # the indices refusals name
    assert batches.counts([1, 2], refused={1, 3, 4}) == {1: {"a": 2}, 2: {"a": 2}}
