import json

import pytest

from elasticity.checkpoint.serde import (
    checkpoint_key,
    offsets_json,
    parse_checkpoint_key,
    v1_from_json,
    v1_to_json,
    v2_from_json,
    v2_json,
    v2_to_json,
    watermarks_from_json,
    watermarks_to_json,
)
from elasticity.checkpoint.task_checkpoint import (
    CheckpointId,
    CheckpointV1,
    CheckpointV2,
    TaskCheckpoint,
    Watermark,
    to_v1,
    to_v2,
)
from elasticity.checkpoint.versions import Candidate, choose
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import SerdeError

SSP = SystemStreamPartition("kafka", "orders", 3)

# As Samza's CheckpointV1Serde writes it: SSP.toString() -> 4 string fields.
SAMZA_V1 = (
    '{"SystemStreamPartition [kafka, orders, 3]": {"system": "kafka", "stream": "orders", "partition": "3", "offset": "42"}}'
)
# As SamzaObjectMapper writes a CheckpointV2 before keyBuckets: 3-part SSP keys.
SAMZA_V2 = (
    '{"checkpoint-id": "1614147487244-33577", "input-offsets": {"kafka.orders.3": "42"},'
    ' "state-checkpoint-markers": {"org.apache.samza.storage.KafkaChangelogStateBackendFactory": {"store1": "kafka;changelog;3;50"}},'
    ' "some-future-field": 1}'
)


def test_reads_samza_v1():
    assert v1_from_json(SAMZA_V1).offsets == {SSP: "42"}


def test_reads_samza_v2_with_3_part_keys_and_ignores_unknown_fields():
    cp = v2_from_json(SAMZA_V2)
    assert cp.checkpoint_id == CheckpointId(1614147487244, 33577)
    assert cp.input_offsets == {SSP: "42"}
    assert cp.state_checkpoint_markers["org.apache.samza.storage.KafkaChangelogStateBackendFactory"] == {
        "store1": "kafka;changelog;3;50"
    }


def test_v1_and_v2_round_trip_with_key_buckets():
    kb = SSP.with_key_bucket(1)
    v1 = CheckpointV1({kb: "7", SSP.with_key_bucket(0): "9"})
    assert v1_from_json(v1_to_json(v1)) == v1
    entry = json.loads(v1_to_json(v1))["SystemStreamPartition [kafka, orders, 3, 1]"]
    assert entry == {"system": "kafka", "stream": "orders", "partition": "3", "offset": "7", "keyBucket": "1"}
    v2 = CheckpointV2(CheckpointId(1, 2), {kb: "7"}, {"backend": {"store": "marker"}})
    assert v2_from_json(v2_to_json(v2)) == v2
    assert json.loads(v2_to_json(v2))["input-offsets"] == {"kafka.orders.3.1": "7"}


def test_unbucketed_ssps_are_written_as_samza_writes_them():
    """3-part V2 keys and no keyBucket in V1, byte for byte as Samza's Jackson mappers write them."""
    cp = TaskCheckpoint(task_name=TaskName("Partition 3"), offsets={SSP: 42})
    assert v1_to_json(to_v1(cp)) == (
        '{"SystemStreamPartition [kafka, orders, 3]":{"system":"kafka","partition":"3","offset":"42","stream":"orders"}}'
    )  # CheckpointV1Serde's HashMap order
    v2 = json.loads(v2_to_json(to_v2(cp, CheckpointId(1614147487244, 33577))))
    assert v2 == {
        "version": 2,
        "checkpoint-id": "1614147487244-33577",
        "input-offsets": {"kafka.orders.3": "42"},
        "state-checkpoint-markers": {},
    }
    assert (
        str(SSP) == "SystemStreamPartition [kafka, orders, 3]"
        and str(SSP.with_key_bucket(0)) == "SystemStreamPartition [kafka, orders, 3, 0]"
    )


def test_readers_accept_both_forms():
    four = '{"checkpoint-id": "1-2", "input-offsets": {"kafka.orders.3.-1": "5", "kafka.orders.4.1": "6"}}'
    assert v2_from_json(four).input_offsets == {SSP: "5", SystemStreamPartition("kafka", "orders", 4, 1): "6"}
    with_bucket = '{"x": {"system": "kafka", "stream": "orders", "partition": "3", "keyBucket": "-1", "offset": "5"}}'
    assert v1_from_json(with_bucket).offsets == {SSP: "5"}


def test_v1_without_key_bucket_and_v2_without_markers():
    """Fixtures as older Samza versions wrote them: V1 entries without keyBucket, V2 without state-checkpoint-markers."""
    v1 = v1_from_json(
        '{"SystemStreamPartition [kafka, orders, 3]": {"system": "kafka", "stream": "orders", "partition": "3", "offset": null}}'
    )
    assert v1.offsets == {SSP: None}
    v2 = v2_from_json('{"checkpoint-id": "7-8", "input-offsets": {"kafka.orders.3": "9"}}')
    assert v2 == CheckpointV2(CheckpointId(7, 8), {SSP: "9"}, {})


def test_task_checkpoint_to_both_formats():
    cp = TaskCheckpoint(task_name=TaskName("Partition_3-1-2"), offsets={SSP.with_key_bucket(1): 10})
    assert to_v1(cp).offsets == {SSP.with_key_bucket(1): "10"}
    assert to_v2(cp, CheckpointId(5, 6)).input_offsets == {SSP.with_key_bucket(1): "10"}


def test_checkpoint_log_key_is_samzas():
    key = checkpoint_key(TaskName("Partition 0"), "org.apache.samza.container.grouper.stream.GroupByPartitionFactory", 2)
    assert json.loads(key) == {
        "systemstreampartition-grouper-factory": "org.apache.samza.container.grouper.stream.GroupByPartitionFactory",
        "taskName": "Partition 0",
        "type": "checkpoint-v2",
    }
    assert parse_checkpoint_key(key)[2] == 2
    assert parse_checkpoint_key(checkpoint_key(TaskName("Partition 0"), "g", 1))[2] == 1
    with pytest.raises(SerdeError, match="type"):
        parse_checkpoint_key('{"taskName": "x", "type": "changelog"}')


def test_checkpoint_id():
    a, b = CheckpointId.create(), CheckpointId.create()
    assert a != b and CheckpointId.parse(str(a)) == a
    with pytest.raises(ValueError, match="millis"):
        CheckpointId.parse("abc")


def test_watermarks_round_trip():
    wms = {SSP.with_key_bucket(0): (Watermark(4, 2, 100), Watermark(4, 0, 90))}
    assert watermarks_from_json(watermarks_to_json(wms)) == wms
    assert watermarks_from_json(None) == {}


def test_corrupt_v2_is_a_clear_error():
    with pytest.raises(SerdeError, match="CheckpointV2"):
        v2_from_json('{"input-offsets": {}}')


V1, V2 = Candidate(1_000, "v1"), Candidate(2_000, "v2")


@pytest.mark.parametrize(
    "available,read,expected",
    [
        ({1: V1}, (1,), "v1"),  # V1 only
        ({2: V2}, (2,), "v2"),  # V2 only
        ({1: V1}, (2, 1), "v1"),  # upgrade: a job that only wrote V1 keeps its place
        ({1: V1, 2: V2}, (2, 1), "v2"),  # both: priority
        ({1: V1, 2: V2}, (1, 2), "v1"),  # rollback to reading V1 first
        ({2: V2}, (1,), None),  # V1-only reader ignores V2
    ],
)
def test_read_version_priority(available, read, expected):
    chosen = choose(available, read, live_max_age_ms=600_000)
    assert (chosen.payload if chosen else None) == expected


def test_newer_lower_priority_version_wins_after_live_max_age():
    old_v2, fresh_v1 = Candidate(0, "v2"), Candidate(700_000, "v1")
    assert choose({1: fresh_v1, 2: old_v2}, (2, 1), live_max_age_ms=600_000).payload == "v1"
    assert choose({1: fresh_v1, 2: old_v2}, (2, 1), live_max_age_ms=800_000).payload == "v2"


@pytest.mark.parametrize(
    "ssps",
    [
        [],
        [SSP],
        [SystemStreamPartition("kafka", "orders", p, b) for p in (0, 3, 17) for b in (0, 1, 5)],
        [SystemStreamPartition("kafka", "orders", 2), SystemStreamPartition("kafka", "web.clicks", 2, 7)],
        [SystemStreamPartition("kafka", 'odd":null"name', 0, 1), SystemStreamPartition("kafka", '"offset":null', 1)],
        [SystemStreamPartition("hdfs", f"s{i}", i % 5, i % 3) for i in range(40)],
    ],
)
def test_offsets_from_a_template_are_the_full_encoding(ssps):
    """The commit's templated payloads are byte for byte what the full encoders write, odd names included."""
    offsets = {s: 1000 * i + 7 for i, s in enumerate(ssps)}
    cp = TaskCheckpoint(task_name=TaskName("Partition_0-0-4"), offsets=offsets)
    assert offsets_json(offsets, 1) == v1_to_json(to_v1(cp))
    cid = CheckpointId.parse("1614147487244-33577")
    markers = {"f.Blob": {"store1": "a;b", "store0": "c"}, "f.Kafka": {"store1": "kafka;changelog;3;50"}}
    for marks in ({}, markers):
        assert v2_json(cid, offsets, marks) == v2_to_json(CheckpointV2(cid, {s: str(o) for s, o in offsets.items()}, marks))
