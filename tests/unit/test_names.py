"""Names that become paths and topics: a job name, a stream and a run name can never leave their folder, and
bad ones are refused at config check naming the key."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.config import ConfigError, validate
from elasticity.config.names import is_job_name, is_topic, path_part

ROOT = Path("/srv/elasticity/home")


@given(st.text())
def test_a_run_name_is_one_segment_under_its_folder(name):
    part = path_part(name)
    assert part and "/" not in part and part not in (".", "..") and "\0" not in part
    assert (ROOT / "runs" / part).resolve().parent == ROOT / "runs"


@given(st.text())
def test_an_accepted_job_name_stays_under_the_home_and_is_a_topic_and_dag_id_part(name):
    if is_job_name(name):
        assert (ROOT / name).resolve().parent == ROOT
        assert is_topic(name) and len(f"elastic_microbatch__{name}") <= 250


@pytest.mark.parametrize("name", ["../x", "/abs", ".", "..", ".hidden", "a b", "a/b", "x" * 201, "", "caf\xe9"])
def test_a_bad_job_name_is_refused_naming_the_key(name):
    with pytest.raises(ConfigError, match=r"job.name="):
        validate({"job.name": name, "task.inputs": "kafka.t"})


@pytest.mark.parametrize("stream", ["a/b", ".", "..", "x" * 250, "a b", "t\xe9"])
def test_a_stream_that_is_no_kafka_topic_is_refused_naming_it(stream):
    with pytest.raises(ConfigError, match=r"task.inputs=.*stream .* is not a Kafka topic name"):
        validate({"job.name": "j", "task.inputs": f"kafka.{stream}"})


def test_good_names_pass():
    assert (
        validate({"job.name": "orders-v2.eu_1", "task.inputs": "kafka.orders.v2,kafka.clicks_eu-1"}).job_name == "orders-v2.eu_1"
    )


@pytest.mark.parametrize("job_id", ["../x", "/abs", "..", "a b", "a/b"])
def test_a_bad_job_id_is_refused_naming_the_key(job_id):
    with pytest.raises(ConfigError, match=r"job.id="):
        validate({"job.name": "j", "job.id": job_id, "task.inputs": "kafka.t"})


def test_a_commit_topic_over_kafkas_limit_is_refused_at_config_check():
    validate({"job.name": "j" * 200, "job.id": "i" * 27, "task.inputs": "kafka.t"})  # 249: Kafka's limit
    with pytest.raises(ConfigError, match=r"job.name and job.id: .* 250 characters, over Kafka's 249"):
        validate({"job.name": "j" * 200, "job.id": "i" * 28, "task.inputs": "kafka.t"})


@pytest.mark.parametrize("stream", ["a b", "..", "t\xe9"])
def test_a_side_input_that_is_no_kafka_topic_is_refused_naming_the_key(stream):
    with pytest.raises(ConfigError, match=r"stores.users.side.inputs=.*is not a Kafka topic name"):
        validate({"job.name": "j", "task.inputs": "kafka.t", "stores.users.side.inputs": f"kafka.{stream}"})


@pytest.mark.parametrize(
    ("spec", "refused"),
    [("parquet.../x", "folder"), ("parquet./abs", "folder"), ("parquet...", "folder"), ("kafka.a b", "Kafka topic")],
)
def test_an_output_name_that_would_leave_its_folder_or_is_no_topic_is_refused(spec, refused):
    from elasticity.api.stream import ApplicationDescriptor

    app = ApplicationDescriptor(())
    with pytest.raises(ValueError, match=refused):
        app.output(spec)
    assert app.output("parquet.enriched-v2").name == "enriched-v2" and app.output("kafka.out.v2").name == "out.v2"
