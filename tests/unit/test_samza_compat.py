"""Samza compatibility of the serialized forms: Samza's own test fixtures (tests/samza_fixtures/serde.txt)
read by the project's readers and reproduced byte for byte by its writers, and what the project writes
read back by Samza's reading rules (tests/support/samza_rules.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.checkpoint import samza_topic
from elasticity.checkpoint.serde import checkpoint_key, parse_checkpoint_key, v1_from_json, v1_to_json, v2_from_json, v2_to_json
from elasticity.checkpoint.state_markers import ChangelogSSPOffset, KafkaChangelogMarker
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV1, CheckpointV2, TaskCheckpoint, Watermark
from elasticity.config import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY
from elasticity.jobmodel.grouping import Grouper
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import SerdeError
from elasticity.state.backends.snapshot_index import FileBlob, FileIndex, FileMetadata, SnapshotIndex, SnapshotMetadata
from tests.support import samza_rules

GBP = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
CID = CheckpointId(1614147487244, 33577)


def _fixtures() -> dict[str, str]:
    text = (Path(__file__).parents[1] / "samza_fixtures" / "serde.txt").read_text()
    return dict(line.split(" = ", 1) for line in text.splitlines() if line and not line.startswith("#"))


F = _fixtures()
SSP777 = SystemStreamPartition("test-system", "test-stream", 777)
TI_INPUT = SystemStreamPartition("test-system", "test-stream", 0)
TI_CHANGELOG = SystemStreamPartition("test-system", "test-changelog-stream", 0)


def test_checkpoint_log_keys_are_byte_equal():
    for version, name in ((1, "log_key_v1"), (2, "log_key_v2")):
        assert checkpoint_key(TaskName("Partition 0"), GBP, version) == F[name]
        assert parse_checkpoint_key(F[name]) == (TaskName("Partition 0"), GBP, version)


def test_checkpoints_of_samzas_serde_tests_read_and_written_byte_equal():
    v1 = CheckpointV1({SSP777: "1"})
    assert v1_from_json(F["checkpoint_v1"]) == v1 and v1_to_json(v1) == F["checkpoint_v1"]
    markers = {"factory1": {"store1": "marker1", "store2": "marker2"}, "factory2": {"store1": "marker3", "store2": "marker4"}}
    v2 = CheckpointV2(CID, {SSP777: "1"}, markers)
    assert v2_from_json(F["checkpoint_v2"]) == v2 and v2_to_json(v2) == F["checkpoint_v2"]
    stateless = CheckpointV2(CID, {SSP777: "1"}, {})
    assert v2_from_json(F["checkpoint_v2_stateless"]) == stateless and v2_to_json(stateless) == F["checkpoint_v2_stateless"]


def test_kafka_state_checkpoint_markers_are_byte_equal():
    null = KafkaChangelogMarker(SystemStreamPartition("system", "stream", 1), None)
    assert (
        KafkaChangelogMarker.from_json(F["kafka_marker_null_offset"]) == null and null.to_json() == F["kafka_marker_null_offset"]
    )
    five = KafkaChangelogMarker(TI_CHANGELOG, 5)
    assert KafkaChangelogMarker.from_json(F["task_instance_marker"]) == five and five.to_json() == F["task_instance_marker"]
    with pytest.raises(SerdeError, match="Kafka changelog marker"):
        KafkaChangelogMarker.from_json(
            '{"version":1,"changelog-ssp":{"system":"s","stream":"t","partition":0},"changelog-offset":"x"}'
        )


def test_changelog_ssp_offsets():
    assert ChangelogSSPOffset.parse("1614147487244-33577:5") == ChangelogSSPOffset(CID, 5)
    assert (
        str(ChangelogSSPOffset(CID, None)) == "1614147487244-33577:null" and ChangelogSSPOffset.parse("1-2:null").offset is None
    )
    for bad in ("", "5", "1-2:3:4", "x:5"):
        with pytest.raises(SerdeError, match="checkpointId"):
            ChangelogSSPOffset.parse(bad)


def test_a_stateful_samza_checkpoint_imports_with_its_state_from_v1_and_v2():
    """TaskInstance's checkpoints of a task with a Kafka-changelog store: V1 carries the changelog SSP's
    `<checkpointId>:<offset>` among the input offsets, V2 the marker; both import to the same checkpoint."""
    task = TaskName("taskName")
    changelogs = {SystemStream("test-system", "test-changelog-stream"): "storeName"}
    from_v1 = samza_topic.from_samza(task, v1_from_json(F["task_instance_v1"]), changelogs)
    from_v2 = samza_topic.from_samza(task, v2_from_json(F["task_instance_v2"]), changelogs)
    for cp in (from_v1, from_v2):
        assert cp.offsets == {TI_INPUT: 5}  # last processed 4: resume at 5
        assert cp.checkpoint_id == CID
        assert cp.state_markers == {KAFKA_CHANGELOG_FACTORY: {"storeName": F["task_instance_marker"]}}
    # ... and exports back to the exact bytes TaskInstance wrote
    assert samza_topic.to_samza(from_v1, 1, CheckpointId(1, 1)) == F["task_instance_v1"]
    assert samza_topic.to_samza(from_v1, 2, CheckpointId(1, 1)) == F["task_instance_v2"]


def test_a_changelog_offset_on_an_unknown_stream_names_the_fix():
    with pytest.raises(SerdeError, match=r"stores\.<store>\.changelog=test-system\.test-changelog-stream"):
        samza_topic.from_samza(TaskName("taskName"), v1_from_json(F["task_instance_v1"]), {})


def test_snapshot_index_of_samzas_serde_test_reads_and_writes_byte_equal():
    index = SnapshotIndex.from_json(F["snapshot_index"])
    meta = FileMetadata(
        creation_time_millis=0, last_modified_time_millis=0, size=0, owner="owner", group="group", permissions="rwxrw-r--"
    )
    assert index == SnapshotIndex(
        creation_time_millis=1614147487244,
        metadata=SnapshotMetadata(checkpoint_id=CID, job_name="job", job_id="123", task_name="task", store_name="store"),
        files_present=tuple(FileIndex(n, (FileBlob(n),), meta, 0) for n in "abz"),
        files_removed=(),
        prev_snapshot_index_blob_id=None,
    )
    assert index.to_json() == F["snapshot_index"]
    samza_rules.snapshot_index(index.to_json().encode())


def test_an_index_without_posix_metadata_is_what_samza_refuses():
    """What this project wrote before: Samza's FileMetadata requires owner, group and permissions."""
    old = json.loads(F["snapshot_index"])
    for f in old["dir-index"]["files-present"]:
        f["file-metadata"] = {k: f["file-metadata"][k] for k in ("creation-time-millis", "last-modified-time-millis", "size")}
    with pytest.raises(samza_rules.SamzaWouldFail, match="owner not blank"):
        samza_rules.snapshot_index(json.dumps(old).encode())
    assert SnapshotIndex.from_json(json.dumps(old)).files_present[0].size == 0  # still read here


def test_file_metadata_is_the_files_posix_attributes(tmp_path):
    f = tmp_path / "000007.sst"
    f.write_bytes(b"x" * 10)
    f.chmod(0o640)
    m = FileMetadata.of(f)
    assert m.size == 10 and m.permissions == "rw-r-----" and m.owner and m.group
    assert m.last_modified_time_millis == f.stat().st_mtime_ns // 1_000_000 and m.creation_time_millis >= 0


offsets = st.integers(min_value=0, max_value=2**40)
names = st.sampled_from(["orders", "page-views", "a_b", "clicks2"])


@given(
    st.dictionaries(st.tuples(names, st.integers(0, 31)), offsets, min_size=1, max_size=6),
    st.dictionaries(st.sampled_from(["totals", "counts", "s1"]), st.one_of(st.none(), offsets), max_size=3),
    st.integers(0, 31),
)
def test_samza_reads_what_export_writes(inputs, stores, changelog_partition):
    """Any checkpoint exported is read by Samza's rules as the same last-processed offsets and the same state."""
    task = TaskName(f"Partition {changelog_partition}")
    changelogs = {s: ("kafka", f"{s}-changelog") for s in stores}
    markers = {
        s: KafkaChangelogMarker(SystemStreamPartition("kafka", f"{s}-changelog", changelog_partition), o).to_json()
        for s, o in stores.items()
    }
    cp = TaskCheckpoint(
        task_name=task,
        offsets={SystemStreamPartition("kafka", n, p): o + 1 for (n, p), o in inputs.items()},
        checkpoint_id=CID if markers else None,
        state_markers={KAFKA_CHANGELOG_FACTORY: markers} if markers else {},
    )
    ((k1, v1), (k2, v2)) = samza_topic.to_samza_messages([cp], Grouper.GROUP_BY_PARTITION, (1, 2), lambda: CheckpointId(7, 8))
    assert samza_rules.log_key(k1)["type"] == "checkpoint" and samza_rules.log_key(k2)["type"] == "checkpoint-v2"
    expected_inputs = {samza_rules.SSP("kafka", n, p): str(o) for (n, p), o in inputs.items()}
    read_v1 = samza_rules.checkpoint_v1(v1)
    assert {s: o for s, o in read_v1.items() if s.stream in {n for n, _ in inputs}} == expected_inputs
    cid, read_inputs, _ = samza_rules.checkpoint_v2(v2)
    assert read_inputs == expected_inputs and cid == ((CID.millis, CID.nano_id) if markers else (7, 8))
    for version, value in ((1, v1), (2, v2)):
        state = samza_rules.changelog_offsets(value, version, changelogs, changelog_partition)
        assert {s: o for s, (_, o) in state.items()} == {s: None if o is None else str(o) for s, o in stores.items()}
    # and the project reads its own export back to the same checkpoint
    for value, version in ((v1, 1), (v2, 2)):
        parsed = v1_from_json(value.decode()) if version == 1 else v2_from_json(value.decode())
        back = samza_topic.from_samza(task, parsed, {SystemStream(*c): s for s, c in changelogs.items()})
        assert back.offsets == cp.offsets and back.state_markers == cp.state_markers


SSP0, SSP1 = SystemStreamPartition("kafka", "orders", 0), SystemStreamPartition("kafka", "orders", 1)


def _at_4(offsets_0, offsets_1):
    return [
        TaskCheckpoint(task_name=TaskName(f"Partition_{p}-{b}-4"), offsets={s.with_key_bucket(b): o})
        for p, (s, offs) in enumerate(((SSP0, offsets_0), (SSP1, offsets_1)))
        for b, o in enumerate(offs)
    ]


def test_export_from_factor_4_writes_one_offset_per_partition_that_loses_nothing():
    merged = samza_topic.at_factor_1(_at_4([10, 10, 10, 10], [7, 7, 7, 7]), 4)
    assert merged == [
        TaskCheckpoint(task_name=TaskName("Partition 0"), offsets={SSP0: 10}),
        TaskCheckpoint(task_name=TaskName("Partition 1"), offsets={SSP1: 7}),
    ]
    with pytest.raises(SerdeError, match=r"bucket 2 at 14.*slowest at 10.*run-batch --until-caught-up.*--allow-reprocessing"):
        samza_topic.at_factor_1(_at_4([10, 12, 14, 10], [7, 7, 7, 7]), 4)
    allowed = samza_topic.at_factor_1(_at_4([10, 12, 14, 10], [9, 7, 8, 7]), 4, allow_reprocessing=True)
    assert [cp.offsets for cp in allowed] == [{SSP0: 10}, {SSP1: 7}]  # the min over the buckets: nothing skipped


def test_export_from_factor_4_merges_watermarks_too():
    """A bucket left behind a merge with a watermark: the min is its offset, the watermark says more was done."""
    cps = _at_4([10, 10, 10, 10], [7, 7, 7, 7])
    cps[0] = TaskCheckpoint(
        task_name=cps[0].task_name,
        offsets={SSP0.with_key_bucket(0): 10},
        watermarks={SSP0.with_key_bucket(0): (Watermark(8, 4, 12),)},
    )
    with pytest.raises(SerdeError, match="different offsets"):
        samza_topic.at_factor_1(cps, 4)


def test_export_of_state_at_factor_above_1_names_the_rescale():
    cps = _at_4([1, 1, 1, 1], [1, 1, 1, 1])
    cps[0] = TaskCheckpoint(
        task_name=cps[0].task_name, offsets=cps[0].offsets, checkpoint_id=CID, state_markers={BLOB_STORE_FACTORY: {"s": "x"}}
    )
    with pytest.raises(SerdeError, match=r"rescale --factor 1"):
        samza_topic.at_factor_1(cps, 4)
