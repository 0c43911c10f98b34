"""Samza's checkpoint topic: messages built by Samza's serde rules, read with its rules, and written back."""

import json

import pytest

from elasticity.checkpoint.samza_topic import LogMessage, from_samza, last_checkpoints, to_samza_messages
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint, Watermark
from elasticity.jobmodel.grouping import Grouper
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import SerdeError

GBP = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
P0, P1 = TaskName("Partition 0"), TaskName("Partition 1")


def ssp(p: int, bucket: int = -1) -> SystemStreamPartition:
    return SystemStreamPartition("kafka", "orders", p, bucket)


def key(task: str, kind: str, grouper: str = GBP) -> bytes:
    """KafkaCheckpointLogKeySerde: Jackson over ImmutableMap.of(grouper, taskName, type), compact."""
    return json.dumps(
        {"systemstreampartition-grouper-factory": grouper, "taskName": task, "type": kind}, separators=(",", ":")
    ).encode()


def v1(partition: int, offset: str | None, stream: str = "orders") -> bytes:
    """CheckpointV1Serde: SSP.toString() -> {system, stream, partition, offset}, all strings."""
    entry = {"system": "kafka", "stream": stream, "partition": str(partition), "offset": offset}
    return json.dumps({f"SystemStreamPartition [kafka, {stream}, {partition}]": entry}, separators=(",", ":")).encode()


def v2(partition: int, offset: str, cid: str = "1614147487244-33577", stream: str = "orders") -> bytes:
    """CheckpointV2Serde (SamzaObjectMapper): version getter, checkpoint-id, 3-part input-offsets keys, markers."""
    doc = {
        "version": 2,
        "checkpoint-id": cid,
        "input-offsets": {f"kafka.{stream}.{partition}": offset},
        "state-checkpoint-markers": {},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def log(*messages: tuple[bytes | None, bytes, int]) -> list[LogMessage]:
    return [LogMessage(i, k, v, ts) for i, (k, v, ts) in enumerate(messages)]


def read(messages, read_versions=(1,), max_age=600_000):
    found = last_checkpoints(messages, Grouper.GROUP_BY_PARTITION, read_versions, max_age)
    return {t: from_samza(t, f.checkpoint).offsets for t, f in found.items()}


def test_the_newest_message_of_a_task_wins_and_offsets_become_next_to_process():
    messages = log(
        (key("Partition 0", "checkpoint"), v1(0, "4"), 1_000),
        (key("Partition 1", "checkpoint"), v1(1, "9"), 1_001),
        (key("Partition 0", "checkpoint"), v1(0, "41"), 2_000),
    )
    assert read(messages) == {P0: {ssp(0): 42}, P1: {ssp(1): 10}}  # last processed 41: resume at 42


@pytest.mark.parametrize(
    "read_versions,v1_time,expected",
    [
        ((1,), 2_000, 11),  # V1 only: the V2 message is skipped
        ((2,), 2_000, 21),  # V2 only
        ((2, 1), 2_000, 21),  # V2 first: a later V1 within the max age does not replace it
        ((2, 1), 700_001, 11),  # ... unless it is newer by more than task.live.checkpoint.max.age
        ((1, 2), 2_000, 11),  # V1 first: the later V1 replaces the V2
    ],
)
def test_samzas_read_version_rules(read_versions, v1_time, expected):
    messages = log(
        (key("Partition 0", "checkpoint-v2"), v2(0, "20"), 1_000), (key("Partition 0", "checkpoint"), v1(0, "10"), v1_time)
    )
    assert read(messages, read_versions) == {P0: {ssp(0): expected}}


def test_unknown_key_types_are_skipped_and_null_offsets_left_out():
    messages = log(
        (key("Partition 0", "changelog-v9"), b"whatever", 1),
        (key("Partition 0", "checkpoint"), v1(0, None), 2),
    )
    assert read(messages) == {P0: {}}


def test_a_grouper_mismatch_fails_naming_both():
    other = "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory"
    with pytest.raises(SerdeError, match=f"{other}.*{GBP}"):
        read(log((key("Partition 0", "checkpoint", other), v1(0, "1"), 1)))


@pytest.mark.parametrize(
    "message,error",
    [
        ((None, v1(0, "1"), 1), "no key"),
        ((b"not json", v1(0, "1"), 1), "not a Samza checkpoint key"),
        ((key("Partition 0", "checkpoint-v2"), b'{"input-offsets": {}}', 1), "not a CheckpointV2"),
        ((key("Partition 0", "checkpoint"), v1(0, "x"), 1), "offsets must be integers"),
    ],
)
def test_bad_messages_fail_naming_the_offset_or_task(message, error):
    with pytest.raises(SerdeError, match=error):
        read(log(message), (1, 2))


def test_export_writes_samzas_exact_bytes_with_last_processed_offsets():
    cp = TaskCheckpoint(task_name=P0, offsets={ssp(0): 42})
    (k1, m1), (k2, m2) = to_samza_messages([cp], Grouper.GROUP_BY_PARTITION, (1, 2), lambda: CheckpointId(1614147487244, 33577))
    assert k1 == key("Partition 0", "checkpoint") and k2 == key("Partition 0", "checkpoint-v2")
    assert json.loads(m1) == json.loads(v1(0, "41")) and json.loads(m2) == json.loads(v2(0, "41"))


def test_nothing_processed_exports_minus_one_and_reads_back_as_zero():
    ((k, m),) = to_samza_messages([TaskCheckpoint(task_name=P0, offsets={ssp(0): 0})], Grouper.GROUP_BY_PARTITION, (2,))
    assert json.loads(m)["input-offsets"] == {"kafka.orders.0": "-1"}
    assert read(log((k, m, 1)), (2,)) == {P0: {ssp(0): 0}}


def test_a_factor_4_job_round_trips():
    cps = [
        TaskCheckpoint(task_name=TaskName(f"Partition_{p}-{b}-4"), offsets={ssp(p, b): 10 * p + b})
        for p in range(2)
        for b in range(4)
    ]
    messages = [LogMessage(i, k, v, 5) for i, (k, v) in enumerate(to_samza_messages(cps, Grouper.GROUP_BY_PARTITION, (1, 2)))]
    for versions in ((1,), (2,), (2, 1)):
        assert read(messages, versions) == {cp.task_name: cp.offsets for cp in cps}


def test_export_refuses_watermarks_samza_cannot_carry():
    cp = TaskCheckpoint(task_name=P0, offsets={ssp(0): 5}, watermarks={ssp(0): (Watermark(2, 1, 9),)})
    with pytest.raises(SerdeError, match="run a batch until caught up"):
        to_samza_messages([cp], Grouper.GROUP_BY_PARTITION, (1, 2))
