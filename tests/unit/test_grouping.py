from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.config import validate
from elasticity.jobmodel.grouping import GroupingError, build_job_model
from elasticity.jobmodel.keybucket import key_bucket
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from elasticity.jobmodel.tasknames import parse_task_name
from tests.support.strategies import job_layouts

# The mappings written in SAMZA-71, verbatim.
SAMZA71_MAX = """
IS2:0 - StreamTask:0
IS2:1 - StreamTask:1
IS2:2 - StreamTask:2
IS2:3 - StreamTask:3
IS2:4 - StreamTask:4
IS2:5 - StreamTask:5
IS2:6 - StreamTask:6
IS2:7 - StreamTask:7
IS1:0 - StreamTask:8
IS1:1 - StreamTask:9
IS1:2 - StreamTask:10
IS1:3 - StreamTask:11
"""

SAMZA71_COGROUP = """
IS1:0 - StreamTask:0
IS1:1 - StreamTask:1
IS1:2 - StreamTask:2
IS1:3 - StreamTask:3
IS1:4 - StreamTask:0
IS1:5 - StreamTask:1
IS1:6 - StreamTask:2
IS1:7 - StreamTask:3
IS2:0 - StreamTask:0
IS2:1 - StreamTask:1
IS2:2 - StreamTask:2
IS2:3 - StreamTask:3
IS2:4 - StreamTask:0
IS2:5 - StreamTask:1
IS2:6 - StreamTask:2
IS2:7 - StreamTask:3
IS2:8 - StreamTask:0
IS2:9 - StreamTask:1
IS2:10 - StreamTask:2
IS2:11 - StreamTask:3
"""


def _mapping(model):
    """`IS:p - StreamTask:n` for every SSP, as SAMZA-71 writes it."""
    out = {}
    for task in model.tasks():
        n = parse_task_name(task.task_name).partition
        for s in task.system_stream_partitions:
            out[f"{s.stream}:{s.partition}"] = f"StreamTask:{n}"
    return out


def _seed(table):
    return dict(line.split(" - ") for line in table.strip().splitlines())


def _config(**props):
    return validate({"job.name": "j", **{k.replace("_", "."): v for k, v in props.items()}})


K = SystemStream("kafka", "IS1"), SystemStream("kafka", "IS2")


def test_samza71_max_table():
    config = _config(task_inputs="kafka.IS2,kafka.IS1", task_partition_scheme="max")
    model = build_job_model(config, {K[0]: 4, K[1]: 8})
    assert _mapping(model) == _seed(SAMZA71_MAX)
    assert len(model.tasks()) == 12


def test_samza71_cogroup_table():
    config = _config(task_inputs="kafka.IS1,kafka.IS2", task_partition_scheme="cogroup")
    model = build_job_model(config, {K[0]: 8, K[1]: 12})
    assert _mapping(model) == _seed(SAMZA71_COGROUP)
    assert len(model.tasks()) == 4


def test_cogroup_gcd_of_4_and_6_is_2():
    config = _config(task_inputs="kafka.IS1,kafka.IS2", task_partition_scheme="cogroup")
    assert len(build_job_model(config, {K[0]: 4, K[1]: 6}).tasks()) == 2


def test_group_by_partition_default_is_samzas_max_partition_count():
    config = _config(task_inputs="kafka.IS1,kafka.IS2")
    model = build_job_model(config, {K[0]: 4, K[1]: 8})
    assert len(model.tasks()) == 8
    assert model.task("Partition 2").system_stream_partitions == {
        SystemStreamPartition("kafka", "IS1", 2),
        SystemStreamPartition("kafka", "IS2", 2),
    }
    assert {t.changelog_partition for t in model.tasks()} == set(range(8))


def test_elasticity_expands_each_task_into_factor_virtual_tasks():
    config = _config(task_inputs="kafka.IS1", job_elasticity_factor="2")
    model = build_job_model(config, {K[0]: 2})
    assert sorted(t.task_name.name for t in model.tasks()) == [
        "Partition_0-0-2",
        "Partition_0-1-2",
        "Partition_1-0-2",
        "Partition_1-1-2",
    ]
    assert model.task("Partition_1-1-2").system_stream_partitions == {SystemStreamPartition("kafka", "IS1", 1, 1)}


def test_group_by_ssp_with_elasticity():
    config = _config(
        task_inputs="kafka.IS1",
        job_systemstreampartition_grouper_factory="GroupBySystemStreamPartition",
        job_elasticity_factor="4",
    )
    model = build_job_model(config, {K[0]: 3})
    assert model.task("SystemStreamPartition [kafka, IS1, 2]-3-4").system_stream_partitions == {
        SystemStreamPartition("kafka", "IS1", 2, 3)
    }
    assert len(model.tasks()) == 12


def test_all_ssp_to_single_task():
    config = _config(task_inputs="kafka.IS1,kafka.IS2", job_systemstreampartition_grouper_factory="AllSspToSingleTask")
    model = build_job_model(config, {K[0]: 2, K[1]: 3})
    (task,) = model.tasks()
    assert task.task_name.name == "Task-0" and len(task.system_stream_partitions) == 5


def test_unknown_partition_count_is_a_clear_error():
    with pytest.raises(GroupingError, match="kafka.IS2"):
        build_job_model(_config(task_inputs="kafka.IS1,kafka.IS2"), {K[0]: 2})


def test_more_containers_than_tasks_is_an_error():
    with pytest.raises(GroupingError, match="job.container.count=5"):
        build_job_model(_config(task_inputs="kafka.IS1", job_container_count="5"), {K[0]: 4})


@given(job_layouts())
def test_every_ssp_bucket_is_owned_by_exactly_one_virtual_task(layout):
    config, counts = layout
    model = build_job_model(config, counts)
    owners = Counter()
    for task in model.tasks():
        for ssp in task.system_stream_partitions:
            owners[ssp] += 1
    factor = config.elasticity_factor
    expected = {
        SystemStreamPartition(ss.system, ss.stream, p, b if factor > 1 else -1)
        for ss, n in counts.items()
        for p in range(n)
        for b in range(factor)
    }
    assert set(owners) == expected
    assert set(owners.values()) == {1}
    assert len({t.changelog_partition for t in model.tasks()}) == len(model.tasks())
    for task in model.tasks():
        parsed = parse_task_name(task.task_name)
        assert parsed.factor == factor
        assert {s.key_bucket for s in task.system_stream_partitions} == {parsed.key_bucket}


@given(
    st.lists(st.integers(1, 6), min_size=2, max_size=3).map(lambda ms: [m * 2 for m in ms]),
    st.integers(1, 8),
    st.lists(st.integers(0, 10**9), min_size=1, max_size=50),
)
def test_cogroup_keeps_a_key_of_all_streams_in_one_virtual_task(counts, factor, keys):
    """Streams partitioned by the same key (partition = key mod count, as in SAMZA-71)
    deliver each key to one virtual task, whatever their partition counts."""
    inputs = [SystemStream("kafka", f"s{i}") for i in range(len(counts))]
    config = _config(task_inputs=",".join(map(str, inputs)), task_partition_scheme="cogroup", job_elasticity_factor=str(factor))
    model = build_job_model(config, dict(zip(inputs, counts, strict=True)))
    owner = {ssp: t.task_name for t in model.tasks() for ssp in t.system_stream_partitions}
    for key in keys:
        kb = key.to_bytes(8, "big")
        bucket = key_bucket(kb, 0, factor) if factor > 1 else -1
        tasks = {owner[SystemStreamPartition("kafka", ss.stream, key % n, bucket)] for ss, n in zip(inputs, counts, strict=True)}
        assert len(tasks) == 1


@given(job_layouts(max_factor=8), st.integers(1, 40))
def test_virtual_tasks_of_one_ssp_stay_together_when_containers_allow(layout, containers):
    config, counts = layout
    parents = len(build_job_model(config.with_overrides({"job.elasticity.factor": "1"}), counts).tasks())
    total = parents * config.elasticity_factor
    containers = min(containers, total)
    model = build_job_model(config.with_overrides({"job.container.count": str(containers)}), counts)
    assert len(model.containers) == containers
    sizes = [len(c.tasks) for c in model.containers]
    assert min(sizes) >= 1
    readers = {}  # SSP -> containers that read it
    for c in model.containers:
        for t in c.tasks:
            for s in t.system_stream_partitions:
                readers.setdefault(s.without_key_bucket(), set()).add(c.processor_id)
    if containers <= parents:
        assert all(len(r) == 1 for r in readers.values())
        assert max(sizes) - min(sizes) <= config.elasticity_factor
    else:
        assert max(sizes) - min(sizes) <= 1
        # a contiguous cut shares an SSP with at most ceil(F / per-container) + 1 containers
        per = total // containers
        assert all(len(r) <= -(-config.elasticity_factor // per) + 1 for r in readers.values())
