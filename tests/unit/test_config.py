import warnings

import pytest

from elasticity.config import (
    MAX_ELASTICITY_FACTOR,
    ConfigError,
    ConfigWarning,
    Grouper,
    PartitionScheme,
    load_config,
    parse_properties,
    validate,
)
from elasticity.model import SystemStream

BASE = {"job.name": "j", "task.inputs": "kafka.orders"}


def test_parse_properties_handles_comments_separators_and_continuations():
    text = "# comment\n! also\njob.name = demo\ntask.inputs: kafka.a,\\\n  kafka.b\n\njob.elasticity.factor 4\n"
    assert parse_properties(text) == {"job.name": "demo", "task.inputs": "kafka.a,kafka.b", "job.elasticity.factor": "4"}


def test_defaults():
    c = validate(BASE)
    assert (c.job_name, c.inputs, c.elasticity_factor) == ("j", (SystemStream("kafka", "orders"),), 1)
    assert c.grouper is Grouper.GROUP_BY_PARTITION and c.partition_scheme is None and c.container_count == 1


@pytest.mark.parametrize(
    "value", ["org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory", "GroupBySystemStreamPartition"]
)
def test_samza_class_names_and_short_names(value):
    c = validate({**BASE, "job.systemstreampartition.grouper.factory": value})
    assert c.grouper is Grouper.GROUP_BY_SYSTEM_STREAM_PARTITION


@pytest.mark.parametrize(
    "key,value,allowed",
    [
        ("job.elasticity.factor", "0", f"an integer from 1 to {MAX_ELASTICITY_FACTOR}"),
        ("job.elasticity.factor", "two", f"an integer from 1 to {MAX_ELASTICITY_FACTOR}"),
        ("job.elasticity.factor", str(MAX_ELASTICITY_FACTOR + 1), "an integer from 1"),
        ("job.container.count", "-1", "an integer >= 1"),
        ("task.partition.scheme", "min", "one of max, cogroup"),
        ("job.systemstreampartition.grouper.factory", "GroupByMagic", "GroupByPartition"),
    ],
)
def test_bad_value_names_key_value_and_allowed(key, value, allowed):
    with pytest.raises(ConfigError) as e:
        validate({**BASE, key: value})
    msg = str(e.value)
    assert key in msg and repr(value) in msg and allowed in msg


def test_all_errors_are_reported_at_once():
    with pytest.raises(ConfigError) as e:
        validate({"job.elasticity.factor": "0"})
    msg = str(e.value)
    assert "job.name is required" in msg and "task.inputs is required" in msg and "job.elasticity.factor" in msg


def test_unknown_key_is_warned_not_fatal():
    with pytest.warns(ConfigWarning, match="job.elastcity.factor"):
        c = validate({**BASE, "job.elastcity.factor": "4"})
    assert c.elasticity_factor == 1


def test_system_scoped_keys_are_known():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = validate({**BASE, "systems.kafka.consumer.bootstrap.servers": "h:9092"})
    assert c.get("systems.kafka.consumer.bootstrap.servers") == "h:9092"


def test_bootstrap_env_overrides_config(monkeypatch):
    c = validate({**BASE, "systems.kafka.consumer.bootstrap.servers": "cfg:9092"})
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert c.bootstrap_servers("kafka") == "cfg:9092"
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "env:9092")
    assert c.bootstrap_servers("kafka") == "env:9092"


def test_all_ssp_to_single_task_rejects_elasticity():
    with pytest.raises(ConfigError, match="AllSspToSingleTask does not support elasticity"):
        validate({**BASE, "job.systemstreampartition.grouper.factory": "AllSspToSingleTask", "job.elasticity.factor": "2"})


def test_scheme_needs_group_by_partition():
    with pytest.raises(ConfigError, match="applies only to GroupByPartition"):
        validate({**BASE, "job.systemstreampartition.grouper.factory": "GroupBySystemStreamPartition", "task.partition.scheme": "max"})


def test_inputs_with_default_system_and_duplicates():
    c = validate({**BASE, "task.inputs": "orders, kafka.payments", "job.default.system": "kafka"})
    assert c.inputs == (SystemStream("kafka", "orders"), SystemStream("kafka", "payments"))
    with pytest.raises(ConfigError, match="job.default.system"):
        validate({**BASE, "task.inputs": "orders"})
    with pytest.raises(ConfigError, match="each stream once"):
        validate({**BASE, "task.inputs": "kafka.a,kafka.a"})


def test_with_overrides_validates_again():
    c = validate(BASE).with_overrides({"job.elasticity.factor": "8"})
    assert c.elasticity_factor == 8
    with pytest.raises(ConfigError, match="job.elasticity.factor"):
        c.with_overrides({"job.elasticity.factor": "0"})


def test_load_config_names_the_file(tmp_path):
    p = tmp_path / "job.properties"
    p.write_text("job.name=x\ntask.inputs=kafka.t\ntask.partition.scheme=cogroup\n")
    assert load_config(p).partition_scheme is PartitionScheme.COGROUP
    p.write_text("job.name=x\n")
    with pytest.raises(ConfigError, match=str(p)):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.properties")


def test_readme_documents_every_key():
    from elasticity.config import KEYS
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    missing = [k.name for k in KEYS if f"`{k.name}`" not in readme]
    assert not missing, f"README.md does not document {missing}"


def test_read_versions_must_read_something_written():
    with pytest.raises(ConfigError, match="reads none of the versions"):
        validate({**BASE, "task.checkpoint.write.versions": "2", "task.checkpoint.read.versions": "1"})
    assert validate({**BASE, "task.checkpoint.write.versions": "2", "task.checkpoint.read.versions": "1,2"}).checkpoint_read_versions == (1, 2)


def test_stream_names_ending_in_a_number_are_rejected():
    """`kafka.orders.5` partition 3 would read back as stream `orders`, partition 5, bucket 3."""
    with pytest.raises(ConfigError, match=r"task.inputs='kafka.orders.5'.*ambiguous"):
        validate({**BASE, "task.inputs": "kafka.orders.5"})
    assert validate({**BASE, "task.inputs": "kafka.orders.v5"}).inputs == (SystemStream("kafka", "orders.v5"),)
