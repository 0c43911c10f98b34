import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStreamPartition, TaskMode, TaskName
from elasticity.jobmodel.object_mapper import (
    SerdeError,
    job_model_from_dict,
    job_model_from_json,
    job_model_to_dict,
    job_model_to_json,
    ssp_from_dict,
    ssp_from_key,
    ssp_to_dict,
    ssp_to_key,
)
from tests.support.strategies import job_layouts, names, streams

# A job model as a Samza version without keyBucket wrote it: 3-part SSPs, an
# empty task-mode, and the older `container-id` field.
SAMZA_JOB_MODEL = """
{
  "config": {"job.name": "wikipedia", "task.inputs": "kafka.edits"},
  "containers": {
    "0": {
      "container-id": "0",
      "tasks": {
        "Partition 0": {
          "task-name": "Partition 0",
          "system-stream-partitions": [{"system": "kafka", "stream": "edits", "partition": 0}],
          "changelog-partition": 0,
          "task-mode": ""
        },
        "Partition 1": {
          "task-name": "Partition 1",
          "system-stream-partitions": [{"system": "kafka", "stream": "edits", "partition": 1}],
          "changelog-partition": 1
        }
      }
    }
  }
}
"""


def test_reads_a_samza_job_model_with_3_part_ssps():
    model = job_model_from_json(SAMZA_JOB_MODEL)
    (container,) = model.containers
    assert container.processor_id == "0"
    task = model.task("Partition 1")
    assert task.system_stream_partitions == {SystemStreamPartition("kafka", "edits", 1)}
    assert task.task_mode is TaskMode.ACTIVE
    # and writes it back 4-part, with the dashed field names
    written = job_model_to_dict(model)["containers"]["0"]
    assert written["processor-id"] == "0"
    ssp = written["tasks"]["Partition 0"]["system-stream-partitions"][0]
    assert ssp == {"system": "kafka", "stream": "edits", "partition": 0, "keyBucket": -1}
    assert set(written["tasks"]["Partition 0"]) == {"task-name", "system-stream-partitions", "changelog-partition", "task-mode"}


def test_container_id_wins_over_its_map_key():
    """Samza's ContainerModel deserializer reads processor-id, then container-id; the map key is not the id."""
    doc = json.loads(SAMZA_JOB_MODEL)
    doc["containers"]["0"]["container-id"] = "5"
    assert [c.processor_id for c in job_model_from_dict(doc).containers] == ["5"]
    doc["containers"]["0"]["processor-id"] = "p-7"
    assert [c.processor_id for c in job_model_from_dict(doc).containers] == ["p-7"]


def test_ssp_keys_are_written_as_samza_writes_them():
    assert ssp_to_key(SystemStreamPartition("kafka", "orders", 3)) == "kafka.orders.3"
    assert ssp_to_key(SystemStreamPartition("kafka", "orders", 3, 1)) == "kafka.orders.3.1"


@pytest.mark.parametrize(
    "key,expected",
    [
        ("kafka.orders.3", SystemStreamPartition("kafka", "orders", 3)),
        ("kafka.orders.3.1", SystemStreamPartition("kafka", "orders", 3, 1)),
        ("kafka.orders.3.-1", SystemStreamPartition("kafka", "orders", 3)),
        ("kafka.orders.v1.3", SystemStreamPartition("kafka", "orders.v1", 3)),
        ("kafka.orders.v1.3.0", SystemStreamPartition("kafka", "orders.v1", 3, 0)),
    ],
)
def test_ssp_keys_read_3_and_4_parts(key, expected):
    assert ssp_from_key(key) == expected


@pytest.mark.parametrize("key", ["kafka.orders", "kafka.orders.x", "kafka", "kafka.orders.3.--1"])
def test_bad_ssp_keys_name_the_expected_form(key):
    with pytest.raises(SerdeError, match="SSP key"):
        ssp_from_key(key)


def test_ssp_dict_without_partition_is_an_error():
    with pytest.raises(SerdeError, match="not a SystemStreamPartition"):
        ssp_from_dict({"system": "kafka", "stream": "s"})


ssps = st.builds(SystemStreamPartition, names, streams, st.integers(0, 10_000), st.integers(-1, 255))


@given(ssps)
def test_ssp_round_trips_as_key_and_dict(ssp):
    assert ssp_from_key(ssp_to_key(ssp)) == ssp
    assert ssp_from_dict(json.loads(json.dumps(ssp_to_dict(ssp)))) == ssp


@given(ssps)
def test_3_part_form_reads_as_whole_partition(ssp):
    three = {k: v for k, v in ssp_to_dict(ssp).items() if k != "keyBucket"}
    assert ssp_from_dict(three) == ssp.without_key_bucket()


@given(job_layouts())
def test_job_model_round_trips(layout):
    config, counts = layout
    model = build_job_model(config, counts)
    assert job_model_from_json(job_model_to_json(model)) == model


def test_job_model_without_containers_is_an_error():
    with pytest.raises(SerdeError, match="containers"):
        job_model_from_dict({"config": {}})


def test_task_names_survive_as_map_keys():
    model = job_model_from_json(SAMZA_JOB_MODEL)
    assert {t.task_name for t in model.tasks()} == {TaskName("Partition 0"), TaskName("Partition 1")}
