import dataclasses
import re
import warnings
from pathlib import Path

import pytest

from elasticity.config import (
    BLOB_STORE_FACTORY,
    FIELD_KEYS,
    KAFKA_CHANGELOG_FACTORY,
    KEYS,
    MAX_ELASTICITY_FACTOR,
    RULES,
    ConfigError,
    ConfigWarning,
    Grouper,
    JobConfig,
    PartitionScheme,
    elasticity_home,
    load_config,
    parse_properties,
    validate,
)
from elasticity.jobmodel.model import SystemStream
from elasticity.metrics.reporters import statsd_targets
from tests.conftest import REPO

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


def test_unknown_key_is_warned_with_a_hint_not_fatal():
    with pytest.warns(ConfigWarning, match="'job.elastcity.factor' \\(did you mean 'job.elasticity.factor'\\?\\)"):
        c = validate({**BASE, "job.elastcity.factor": "4"})
    assert c.elasticity_factor == 1
    with pytest.raises(ConfigError, match="did you mean 'systems.kafka.consumer.bootstrap.servers'"):
        validate({**BASE, "systems.kafka.consumer.bootstrap.server": "h:9092"})  # a Kafka property: never ignored
    with pytest.warns(ConfigWarning) as seen:
        validate({**BASE, "completely.unrelated": "x"})
    assert "did you mean" not in str(seen[0].message)


@pytest.mark.parametrize("strict", [{"job.config.strict": "true"}, {}])
def test_strict_mode_makes_unknown_keys_errors(strict):
    props = {**BASE, "job.elasticity.factr": "4", **strict}
    with pytest.raises(
        ConfigError, match="'job.elasticity.factr' \\(did you mean 'job.elasticity.factor'\\?\\).*not allow unknown keys"
    ):
        validate(props, strict=not strict)


def test_every_default_is_samzas_or_documented():
    c = validate(BASE)
    assert c.offset_default("kafka") == "upcoming"
    assert (c.serde("kafka", "key"), c.serde("kafka", "msg")) == ("string", "json")
    assert c.checkpoint_write_versions == (1, 2) and c.checkpoint_read_versions == (1,)
    assert c.live_checkpoint_max_age_ms == 600_000 and c.commit_max_delay_ms == 60_000
    assert c.commit_timeout_ms == 1_800_000  # Samza's 30 minutes
    assert c.callback_timeout_ms is None and c.max_concurrency == 1
    assert c.thread_pool_size == 256  # not Samza's 0: a factor above 1 runs its virtual tasks side by side
    assert (c.commit_pool_size, c.commit_pool_max_size, c.restore_pool_size, c.restore_pool_max_size) == (2, 64, 2, 64)
    assert c.batch_max_records == 100_000 and c.dead_letter_policy == "dlq"
    assert validate({**BASE, "task.callback.timeout.ms": "-1"}).callback_timeout_ms is None  # Samza's default: no timeout
    assert validate({**BASE, "task.callback.timeout.ms": "250"}).callback_timeout_ms == 250
    assert validate({**BASE, "job.container.thread.pool.size": "0"}).thread_pool_size == 0


@pytest.mark.parametrize(
    "key,value,expected",
    [
        ("job.elasticity.factor", str(MAX_ELASTICITY_FACTOR), MAX_ELASTICITY_FACTOR),
        ("job.elasticity.factor", "1", 1),
        ("batch.max.records", "1", 1),
        ("job.container.thread.pool.size", "1024", 1024),
        ("task.checkpoint.write.versions", "2,1", (2, 1)),
    ],
)
def test_limits_accepted(key, value, expected):
    c = validate({**BASE, key: value, "task.checkpoint.read.versions": "1,2"})
    field = {
        "job.elasticity.factor": "elasticity_factor",
        "batch.max.records": "batch_max_records",
        "job.container.thread.pool.size": "thread_pool_size",
        "task.checkpoint.write.versions": "checkpoint_write_versions",
    }[key]
    assert getattr(c, field) == expected


@pytest.mark.parametrize(
    "key,value,allowed",
    [
        ("task.checkpoint.write.versions", "1,1", "each once"),
        ("task.checkpoint.read.versions", "3", "versions 1 and 2"),
        ("batch.max.records", "0", "an integer >= 1"),
        ("batch.max.records", "-5", "an integer >= 1"),
        ("task.callback.timeout.ms", "0", "-1 (no timeout) or an integer >= 1"),
        ("task.callback.timeout.ms", "-2", "-1 (no timeout) or an integer >= 1"),
        ("job.container.thread.pool.size", "-1", "an integer from 0 to 1024"),
        (
            "systems.kafka.default.stream.offset.default",
            "earliest",
            "one of oldest, upcoming (Kafka's 'earliest' is Samza's 'oldest')",
        ),
        (
            "systems.kafka.default.stream.samza.offset.default",
            "latest",
            "one of oldest, upcoming (Kafka's 'latest' is Samza's 'upcoming')",
        ),
        ("systems.kafka.default.stream.offset.default", "newest", "one of oldest, upcoming"),
        ("task.checkpoint.store.url", "not-a-url", "a SQLAlchemy URL such as sqlite:///"),
        ("task.checkpoint.store.url", "mysql://u@h/db", "backend 'mysql' is not one of sqlite, postgresql"),
        ("job.config.strict", "yes", "one of true, false"),
    ],
)
def test_limits_rejected_naming_key_and_allowed(key, value, allowed):
    with pytest.raises(ConfigError) as e:
        validate({**BASE, key: value})
    assert f"{key}={value!r}: expected" in str(e.value) and allowed in str(e.value)


@pytest.mark.parametrize("url", ["sqlite:///tmp/x.db", "sqlite://", "postgresql+psycopg://postgres@127.0.0.1:5432/test"])
def test_store_urls_accepted(url):
    assert validate({**BASE, "task.checkpoint.store.url": url}).checkpoint_store_url() == url


def test_store_url_from_the_environment_is_checked_too(monkeypatch):
    monkeypatch.setenv("ELASTICITY_CHECKPOINT_STORE_URL", "nonsense")
    with pytest.raises(ConfigError, match="ELASTICITY_CHECKPOINT_STORE_URL='nonsense': expected a SQLAlchemy URL"):
        validate(BASE).checkpoint_store_url()


def test_line_ending_in_an_escaped_backslash_is_not_a_continuation():
    assert parse_properties("a=C:\\\\\nb=2\n") == {"a": "C:\\", "b": "2"}  # as java.util.Properties reads it
    assert parse_properties("a=x\\\\\\\n  y\nb=\\u0041\\tz\n") == {
        "a": "x\\y",
        "b": "A\tz",
    }  # 3 backslashes: one, then a continuation


def test_all_ssp_to_single_task_rejects_more_than_one_container():
    with pytest.raises(ConfigError, match="job.container.count='2'.*expected 1"):
        validate({**BASE, "job.systemstreampartition.grouper.factory": "AllSspToSingleTask", "job.container.count": "2"})


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
        validate(
            {**BASE, "job.systemstreampartition.grouper.factory": "GroupBySystemStreamPartition", "task.partition.scheme": "max"}
        )


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


def test_read_versions_must_read_something_written():
    with pytest.raises(ConfigError, match="reads none of the versions"):
        validate({**BASE, "task.checkpoint.write.versions": "2", "task.checkpoint.read.versions": "1"})
    assert validate(
        {**BASE, "task.checkpoint.write.versions": "2", "task.checkpoint.read.versions": "1,2"}
    ).checkpoint_read_versions == (1, 2)


def test_stream_names_ending_in_a_number_are_rejected():
    """`kafka.orders.5` partition 3 would read back as stream `orders`, partition 5, bucket 3."""
    with pytest.raises(ConfigError, match=r"task.inputs='kafka.orders.5'.*ambiguous"):
        validate({**BASE, "task.inputs": "kafka.orders.5"})
    assert validate({**BASE, "task.inputs": "kafka.orders.v5"}).inputs == (SystemStream("kafka", "orders.v5"),)


def _concrete(name: str) -> str:
    """A key's name with its `<part>`s filled in, as a job would write it."""
    return re.sub(r"<[a-z]+>", "x", name.replace("<client>", "consumer"))


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k.name)
def test_every_key_parses_its_own_default(key):
    """A declared default is text a job could write; it must pass the key's own parser."""
    if key.default is not None:
        key.parser(key.default)
    assert key.doc.endswith(".") and not (key.required and key.default is not None)


def test_every_field_but_raw_and_connections_is_a_declared_key_with_its_default():
    assert {f.name for f in dataclasses.fields(JobConfig)} - {"raw", "connections"} == {name for name, _ in FIELD_KEYS}
    c = validate(BASE)
    for name, key in FIELD_KEYS:
        if not key.required:
            assert getattr(c, name) == key.default_value, key.name
    assert c.app_class == "elasticity.apps.identity:build" and c.callback_timeout_ms is None  # Samza's -1


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k.name)
def test_a_bad_value_of_any_key_names_the_key_and_the_allowed_values(key):
    name = _concrete(key.name)
    bad = next(v for v in ("", "!", "x") if _rejects(key.parser, v))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)  # the deprecated key warns too
        with pytest.raises(ConfigError) as e:
            validate({**BASE, name: bad})
    assert f"{name}={'***' if key.secret else repr(bad)}: expected {key.parser.allowed}" in str(e.value)


def _rejects(parser, text: str) -> bool:
    try:
        parser(text)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize(
    "typo,meant",
    [
        ("task.checkpoint.read.version", "task.checkpoint.read.versions"),
        ("stores.users.changelg", "stores.users.changelog"),
        ("metrics.reporter.statsd.hots", "metrics.reporter.statsd.host"),
        ("systems.kafka.samza.msg.sede", "systems.kafka.samza.msg.serde"),
    ],
)
def test_an_unknown_key_near_a_declared_one_gets_did_you_mean(typo, meant):
    with pytest.warns(ConfigWarning, match=re.escape(f"unknown config key {typo!r} (did you mean {meant!r}?); ignored")):
        validate({**BASE, typo: "1"})


def test_a_deprecated_key_works_with_a_warning_naming_its_successor():
    with pytest.warns(
        ConfigWarning, match=re.escape("stores.<store>.restore.factory is deprecated: use stores.<store>.restore.factories")
    ):
        c = validate({**BASE, "stores.s.restore.factory": "kafka"})
    assert c.value("stores.s.restore.factory") == ("org.apache.samza.storage.KafkaChangelogStateBackendFactory",)


def test_value_reads_a_templated_key_typed_or_its_default():
    c = validate({**BASE, "stores.s.blob.retain": "5", "systems.kafka.samza.key.serde": "byte"})
    assert (c.value("stores.s.blob.retain"), c.value("stores.t.blob.retain")) == (5, 2)
    assert (c.serde("kafka", "key"), c.serde("other", "key")) == ("byte", "string")
    with pytest.raises(KeyError, match="no config key"):
        c.value("stores.s.nothing")


def test_every_rule_says_why():
    assert all(rule.__doc__ and len(rule.__doc__.split()) > 5 for rule in RULES)


def test_elasticity_home_is_read_on_each_call(monkeypatch, tmp_path):
    monkeypatch.delenv("ELASTICITY_HOME", raising=False)
    assert elasticity_home() == Path(".elasticity").resolve()
    monkeypatch.setenv("ELASTICITY_HOME", str(tmp_path / "home"))
    assert elasticity_home() == tmp_path / "home"
    monkeypatch.delenv("ELASTICITY_CHECKPOINT_STORE_URL", raising=False)
    c = validate(BASE)
    assert c.path("job.output.path", "output") == str(tmp_path / "home" / "j" / "output")
    assert c.checkpoint_store_url() == f"sqlite:///{tmp_path / 'home' / 'checkpoints.db'}"


def test_the_job_folders_default_under_the_state_folder_unless_set(monkeypatch, tmp_path):
    monkeypatch.setenv("ELASTICITY_HOME", str(tmp_path / "home"))
    c = validate(BASE)
    home = tmp_path / "home" / "j"
    assert (c.output_dir, c.audit_dir, c.dead_letter_dir) == (
        str(home / "output"),
        str(home / "audit"),
        str(home / "dead-letter"),
    )
    assert c.report_location == str(home / "reports")
    keys = ("job.output.path", "job.audit.path", "job.dead.letter.path", "job.report.path")
    c = validate({**BASE, **{k: f"s3://b/{k}" for k in keys[:3]}, keys[3]: str(tmp_path / "r")})
    assert (c.output_dir, c.audit_dir, c.dead_letter_dir) == tuple(f"s3://b/{k}" for k in keys[:3])
    assert c.report_location == str(tmp_path / "r")


def test_reports_go_to_the_jobs_object_store_when_it_has_one(monkeypatch, tmp_path):
    """Read back by the API server on another host: with blob.store.uri on an object store and no job.report.path,
    the reports go beside the snapshots (its query, the server's options, kept at the end)."""
    monkeypatch.setenv("ELASTICITY_HOME", str(tmp_path / "home"))
    c = validate({**BASE, "blob.store.uri": "s3://state/j/blobs?endpoint_override=h:1&scheme=http"})
    assert c.report_location == "s3://state/j/blobs/reports/j?endpoint_override=h:1&scheme=http"
    assert validate({**BASE, "blob.store.uri": str(tmp_path / "b")}).report_location == str(tmp_path / "home" / "j" / "reports")
    assert validate({**BASE, "blob.store.uri": "s3://x/b", "job.report.path": "s3://y/r"}).report_location == "s3://y/r"


def test_key_value_reads_one_key_of_unvalidated_properties():
    """What a DAG file reads at parse time: the key as written, else its declared default, typed."""
    from elasticity.config import key_value

    assert (
        key_value({}, "airflow.microbatch.schedule") == validate({"job.name": "j", "task.inputs": "kafka.a"}).microbatch_schedule
    )
    assert key_value({"job.elasticity.factor": "8"}, "job.elasticity.factor") == 8
    with pytest.raises(KeyError, match="no config key 'job.elastic.factor'"):
        key_value({}, "job.elastic.factor")


def test_the_autosizer_keys_keep_their_names():
    """Job configs in the field name them so: a rename would silently turn the autosizer off."""
    config = validate(
        {
            "job.name": "j",
            "task.inputs": "kafka.a",
            "job.elasticity.autosize": "true",
            "job.elasticity.autosize.min": "2",
            "job.elasticity.autosize.max": "8",
            "job.elasticity.autosize.cooldown.ms": "1000",
            "job.elasticity.autosize.target.lag.seconds": "30",
            "job.elasticity.manual.hold.ms": "5",
            "job.config.strict": "true",
            "systems.kafka.samza.key.serde": "string",  # else strict mode warns that Samza has no default serde
            "systems.kafka.samza.msg.serde": "json",
            "job.container.thread.pool.size": "8",  # else strict mode warns that Samza's default is 0
        }
    )
    assert (config.autosize, config.autosize_min, config.autosize_max, config.autosize_cooldown_ms) == (True, 2, 8, 1000)
    assert (config.autosize_target_lag_s, config.manual_hold_ms) == (30, 5)


def test_the_statsd_reporter_class_is_known_by_its_old_and_new_module_path():
    for cls in ("statsd", "elasticity.metrics.reporters.StatsdReporter", "elasticity.reporters.StatsdReporter"):
        props = {"job.name": "j", "task.inputs": "kafka.a", "metrics.reporters": "s", "metrics.reporter.s.class": cls}
        assert validate(props).value("metrics.reporter.s.class") == "statsd"


def _samza_cases() -> dict[str, dict[str, str]]:
    """tests/samza_fixtures/config.txt: [case] blocks of keys and expect.<what>= answers."""
    cases: dict[str, dict[str, str]] = {}
    for line in (REPO / "tests" / "samza_fixtures" / "config.txt").read_text().splitlines():
        if line.startswith("["):
            cases[line.strip("[]")] = current = {}
        elif line and not line.startswith("#"):
            k, _, v = line.partition("=")
            current[k] = v
    return cases


SAMZA_CASES = _samza_cases()


def _split(case: str) -> tuple[dict[str, str], dict[str, str]]:
    props = {k: v for k, v in SAMZA_CASES[case].items() if not k.startswith("expect.")}
    return props, {k.removeprefix("expect."): v for k, v in SAMZA_CASES[case].items() if k.startswith("expect.")}


def test_offset_default_is_read_as_samzas_system_config_reads_it():
    props, expect = _split("offset-default")
    config = validate({**BASE, **props})
    assert {s: config.offset_default(s) for s in expect} == expect
    # this product's earlier name is read last: Samza's keys win over it
    both = {**BASE, "systems.k.default.stream.offset.default": "upcoming", "systems.k.samza.offset.default": "oldest"}
    assert validate(both).offset_default("k") == "oldest"
    assert validate({**BASE, "systems.k.default.stream.offset.default": "oldest"}).offset_default("k") == "oldest"


@pytest.mark.parametrize("case", [c for c in SAMZA_CASES if c.startswith("changelog-")])
def test_changelog_streams_are_read_as_samzas_storage_config_reads_them(case):
    props, expect = _split(case)
    if expect["store0"] == "error":
        with pytest.raises(
            ConfigError,
            match=r"stores\.store0\.changelog='changelog-stream0': a stream without a system needs job\.changelog\.system",
        ):
            validate({**BASE, **props})
        return
    changelog = validate({**BASE, **props}).changelog("store0")
    assert (str(changelog) if changelog else "") == expect["store0"]


@pytest.mark.parametrize("case", [c for c in SAMZA_CASES if c.startswith("restore-")])
def test_restore_factories_are_samzas_precedence(case, monkeypatch):
    from elasticity.api import StoreDescriptor
    from elasticity.state import StorageConfig

    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    props, expect = _split(case)
    storage = StorageConfig.of(
        validate({**BASE, "task.checkpoint.read.versions": "2,1", **props}),
        [StoreDescriptor("store1"), StoreDescriptor("store2")],
    )
    short = {KAFKA_CHANGELOG_FACTORY: "kafka", BLOB_STORE_FACTORY: "blobstore"}
    assert {s: ",".join(short[f] for f in storage.store(s).restore_factories) for s in expect} == expect


def test_samzas_reporter_factories_load_with_a_warning_and_are_not_run():
    props = {
        **BASE,
        "metrics.reporters": "jmx,snapshot,statsd",
        "metrics.reporter.jmx.class": "org.apache.samza.metrics.reporter.JmxReporterFactory",
        "metrics.reporter.snapshot.class": "org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory",
        "metrics.reporter.snapshot.stream": "kafka.metrics",
        "metrics.reporter.snapshot.interval": "60",
    }
    with pytest.warns(ConfigWarning) as seen:
        config = validate(props)
    said = [str(w.message) for w in seen]
    assert len(said) == 2 and "JMX reporter" in said[0] and "MetricsSnapshotReporter" in said[1] and "is not run here" in said[1]
    assert [t.reporter for t in statsd_targets(config, env={})] == ["statsd"]


def test_strict_mode_warns_of_each_deliberate_difference():
    props = {
        **BASE,
        "job.elasticity.factor": "4",
        "systems.kafka.default.stream.offset.default": "oldest",
        "stores.s.backup.factories": "blobstore",
        "job.config.strict": "true",
    }
    with pytest.warns(ConfigWarning) as seen:
        validate(props)
    said = "\n".join(str(w.message) for w in seen)
    for part in (
        "xxhash64",
        "Partition_<p>-<bucket>-<F>",
        "samza.key/msg.serde unset",
        "Samza's default 0 runs them one after another",
        "which Samza does not read",
        "restore nothing",
    ):
        assert part in said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate({k: v for k, v in props.items() if k != "job.config.strict"})  # not strict: silent


@pytest.mark.parametrize("pool", ["0", "1"])
def test_a_factor_that_cannot_pay_is_warned_about_naming_the_keys(pool):
    props = {**BASE, "job.elasticity.factor": "8", "job.container.thread.pool.size": pool}
    with pytest.warns(ConfigWarning) as seen:
        assert validate(props).thread_pool_size == int(pool)  # Samza's one after another stays available
    assert [str(w.message).split(":")[0] for w in seen] == [f"job.container.thread.pool.size={pool} with job.elasticity.factor=8"]
    assert "set it to at least 8" in str(seen[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate({**BASE, "job.elasticity.factor": "8"})  # the default pool: the factor pays, nothing to say
        validate({**BASE, "job.container.thread.pool.size": "0"})  # factor 1: one task per partition anyway


def test_exactly_once_outputs_need_a_transactional_producer():
    base = {**BASE, "systems.kafka.producer.acks": "1", "systems.kafka.producer.enable.idempotence": "false"}
    with pytest.raises(ConfigError) as e:
        validate(base)
    assert "systems.kafka.producer.acks='1': processing.guarantee=exactly_once" in str(e.value)
    assert "systems.kafka.producer.enable.idempotence='false'" in str(e.value) and "acks=all" in str(e.value)
    assert validate({**base, "processing.guarantee": "at_least_once"}).processing_guarantee == "at_least_once"
    assert validate({**BASE, "systems.kafka.producer.acks": "all"}).processing_guarantee == "exactly_once"
