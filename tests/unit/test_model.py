import pickle

import pytest

from elasticity.jobmodel.model import (
    NO_KEY_BUCKET,
    ContainerModel,
    JobModel,
    SystemStream,
    SystemStreamPartition,
    TaskModel,
    TaskName,
)


def test_system_stream_parse_keeps_dots_in_the_stream():
    assert SystemStream.parse("kafka.orders.v1") == SystemStream("kafka", "orders.v1")
    with pytest.raises(ValueError, match="system.stream"):
        SystemStream.parse("orders")


def test_system_name_may_not_contain_a_dot():
    with pytest.raises(ValueError, match="no dots"):
        SystemStream("a.b", "s")


def test_ssp_key_bucket_defaults_to_none_and_round_trips():
    ssp = SystemStreamPartition("kafka", "orders", 3)
    assert ssp.key_bucket == NO_KEY_BUCKET and not ssp.has_key_bucket
    kb = ssp.with_key_bucket(2)
    assert kb.has_key_bucket and kb.without_key_bucket() == ssp
    assert kb.system_stream == SystemStream("kafka", "orders")


@pytest.mark.parametrize("partition,bucket", [(-1, -1), (0, -2)])
def test_ssp_rejects_negative_numbers(partition, bucket):
    with pytest.raises(ValueError):
        SystemStreamPartition("kafka", "orders", partition, bucket)


def _task(name, *ssps, cl=0):
    return TaskModel(TaskName(name), frozenset(ssps), cl)


def test_job_model_is_immutable_hashable_and_picklable():
    ssp = SystemStreamPartition("kafka", "orders", 0)
    model = JobModel.of({"job.name": "x"}, [ContainerModel("0", [_task("Partition 0", ssp)])])
    assert hash(model) == hash(pickle.loads(pickle.dumps(model)))
    with pytest.raises(AttributeError):
        model.containers = ()  # type: ignore[misc]
    assert model.task("Partition 0").system_stream_partitions == {ssp}
    assert model.container_of(TaskName("Partition 0")).processor_id == "0"
    with pytest.raises(KeyError, match="Partition 9"):
        model.task("Partition 9")


def test_job_model_rejects_a_task_in_two_containers():
    t = _task("Partition 0", SystemStreamPartition("kafka", "orders", 0))
    with pytest.raises(ValueError, match="more than one container"):
        JobModel.of({}, [ContainerModel("0", [t]), ContainerModel("1", [t])])
