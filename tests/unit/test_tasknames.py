import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName
from elasticity.jobmodel.tasknames import (
    TaskKind,
    all_ssp_task_name,
    parse_task_name,
    partition_task_name,
    ssp_task_name,
)
from tests.support.strategies import names, streams


def test_samza_names_without_elasticity():
    assert partition_task_name(3) == TaskName("Partition 3")
    assert ssp_task_name(SystemStreamPartition("kafka", "orders", 3)) == TaskName("SystemStreamPartition [kafka, orders, 3]")
    assert all_ssp_task_name("0") == TaskName("Task-0")


def test_virtual_task_names_carry_bucket_and_factor():
    assert partition_task_name(0, 1, 2) == TaskName("Partition_0-1-2")
    ssp = SystemStreamPartition("kafka", "orders", 3)
    assert ssp_task_name(ssp, 1, 4) == TaskName("SystemStreamPartition [kafka, orders, 3]-1-4")


@pytest.mark.parametrize("bucket,factor", [(2, 2), (-1, 4), (0, 1)])
def test_impossible_bucket_is_rejected(bucket, factor):
    with pytest.raises(ValueError, match="bucket"):
        partition_task_name(0, bucket, factor)


@given(st.integers(0, 5000), st.integers(2, 256).flatmap(lambda f: st.tuples(st.integers(0, f - 1), st.just(f))))
def test_partition_names_parse_back(p, bf):
    bucket, factor = bf
    parsed = parse_task_name(partition_task_name(p, bucket, factor))
    assert (parsed.kind, parsed.partition, parsed.key_bucket, parsed.factor) == (TaskKind.PARTITION, p, bucket, factor)
    assert parsed.parent == partition_task_name(p)


@given(names, streams, st.integers(0, 5000), st.integers(1, 64).flatmap(lambda f: st.tuples(st.integers(0, f - 1), st.just(f))))
def test_ssp_names_parse_back(system, stream, p, bf):
    bucket, factor = bf
    ssp = SystemStreamPartition(system, stream, p)
    name = ssp_task_name(ssp, bucket, factor) if factor > 1 else ssp_task_name(ssp)
    parsed = parse_task_name(name)
    assert parsed.kind is TaskKind.SYSTEM_STREAM_PARTITION
    assert (parsed.system_stream, parsed.ssp_partition) == (SystemStream(system, stream), p)
    assert (parsed.key_bucket, parsed.factor) == ((bucket, factor) if factor > 1 else (-1, 1))
    assert parsed.parent == ssp_task_name(ssp)


def test_all_ssp_name_parses_back():
    parsed = parse_task_name("Task-0")
    assert parsed.kind is TaskKind.ALL_SSP and parsed.processor_id == "0"


@pytest.mark.parametrize("bad", ["Partition x", "Partition_1-4-4", "Partition_1-2", "foo", "SystemStreamPartition [k, s]"])
def test_unknown_or_inconsistent_names_fail_clearly(bad):
    with pytest.raises(ValueError):
        parse_task_name(bad)
