"""The Kafka sink checks' tables on hand-made topics: what they let pass (a flatMap's several outputs of one
record, a batch whose commit record predates the counts) and what they catch."""

from __future__ import annotations

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from elasticity.quality.checks import KAFKA_COLUMNS, QualityInputs, kafka_loss_table, kafka_order_table, kafka_unique_table
from elasticity.quality.kafka_outputs import kafka_positions


def _topic(*rows: tuple) -> pd.DataFrame:
    """Rows of (output partition, offset, key, source offset, batch, seq); one input partition, one task."""
    return pd.DataFrame(
        [("out", p, o, k, "kafka", "in", 0, so, "Partition_0", b, s) for p, o, k, so, b, s in rows], columns=KAFKA_COLUMNS
    )


def _inputs(topic: pd.DataFrame, batches: list[tuple] = ()) -> QualityInputs:
    empty = pd.DataFrame()
    table = pd.DataFrame(batches, columns=["batch_id", "output", "recorded", "sent"]).astype({"sent": "Float64"})
    return QualityInputs(
        audit=empty, inputs=empty, sink=empty, generation_of_batch={}, factor=1, checkpoints={}, kafka=topic, kafka_batches=table
    )


def test_a_flatmaps_outputs_of_one_record_are_neither_duplicates_nor_out_of_order():
    topic = _topic((0, 0, b"a", 5, 1, 0), (0, 1, b"a", 5, 1, 1), (0, 2, b"a", 6, 1, 2))
    q = _inputs(topic)
    assert not kafka_unique_table(q).duplicated(["source_offset", "nth"]).any()
    assert kafka_order_table(q)["in_order"].all()


def test_a_record_replayed_into_another_batch_is_a_duplicate_and_goes_backwards():
    topic = _topic((0, 0, b"a", 5, 1, 0), (0, 1, b"a", 6, 1, 1), (0, 2, b"a", 5, 2, 0))
    q = _inputs(topic)
    assert kafka_unique_table(q).duplicated(["source_offset", "nth"]).sum() == 1
    assert kafka_order_table(q)["in_order"].tolist() == [True, True, False]


def test_each_committed_batch_has_its_counted_records_or_at_least_its_commit_record():
    topic = _topic((0, 0, b"a", 5, 1, 0), (0, 1, b"b", 6, 2, 0))
    batches = [(1, "out", True, 1.0), (2, "out", True, 2.0), (3, "out", True, None), (4, "out", False, None)]
    t = kafka_loss_table(_inputs(topic, batches))
    assert t["complete"].tolist() == [True, False, True, False]
    assert t["record"].tolist()[1] == "batch 2 to out: 1 visible, 2 sent"
    assert t["record"].tolist()[3] == "batch 4 to out: 0 visible, no commit record visible"


@given(
    st.lists(st.tuples(st.integers(0, 1), st.sampled_from([b"a", b"b", b"c"]), st.integers(0, 30)), min_size=1, max_size=40),
    st.integers(0, 40),
)
def test_an_incremental_run_flags_the_same_outputs_out_of_order_as_a_full_one(outputs, cut):
    """Outputs (output partition, key, source offset) in log order, validated up to `cut` and then from the edge
    with each key's last validated output: the second run flags exactly the rows of the window a full run flags."""
    rows = [(p, i, k, so, 1 if i < cut else 2, i) for i, (p, k, so) in enumerate(outputs)]
    full = kafka_order_table(_inputs(_topic(*rows)))
    before, window = [r for r in rows if r[4] == 1], [r for r in rows if r[4] == 2]
    edge = kafka_positions(None, _topic(*before)) if before else None
    q = QualityInputs(
        audit=pd.DataFrame(),
        inputs=pd.DataFrame(),
        sink=pd.DataFrame(),
        generation_of_batch={},
        factor=1,
        checkpoints={},
        kafka=_topic(*window),
        kafka_positions=edge,
    )
    incremental = kafka_order_table(q)
    assert dict(zip(incremental["record"], incremental["in_order"], strict=True)) == {
        r: ok for r, ok in zip(full["record"], full["in_order"], strict=True) if r in set(incremental["record"])
    }
    assert len(incremental) == len([r for r in window if r[2] is not None])


def test_an_output_of_a_validated_batch_read_past_the_edge_is_a_duplicate():
    topic = _topic((0, 7, b"a", 5, 2, 0), (0, 8, b"b", 1, 1, 0))  # batch 1 was validated: its output is written again
    q = QualityInputs(
        audit=pd.DataFrame(),
        inputs=pd.DataFrame(),
        sink=pd.DataFrame(),
        generation_of_batch={},
        factor=1,
        checkpoints={},
        kafka=topic,
        validated_batch=1,
    )
    assert kafka_unique_table(q).duplicated(["source_offset", "nth"]).sum() == 1
