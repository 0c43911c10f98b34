"""SEP-32's metrics and their StatsD export: config as Airflow's [metrics] and Samza's
reporter keys give it, lines received on a real loopback UDP socket."""

import logging

import pytest

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import ConfigError, validate
from elasticity.jobmodel.model import SystemStream
from elasticity.metrics.job_metrics import batch_metrics, per_message_ns
from elasticity.metrics.reporters import (
    MAX_DATAGRAM,
    Metric,
    Reporters,
    StatsdReporter,
    StatsdTarget,
    metric_name,
    statsd_targets,
)
from elasticity.metrics.summary import BatchSummary
from tests.support.memory import MemoryInputs
from tests.support.statsd import StatsdListener

BASE = {"job.name": "j", "task.inputs": "kafka.orders"}
AIRFLOW_ON = {
    "AIRFLOW__METRICS__STATSD_ON": "True",
    "AIRFLOW__METRICS__STATSD_HOST": "statsd.internal",
    "AIRFLOW__METRICS__STATSD_PORT": "9125",
    "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
}


@pytest.fixture
def listener():
    s = StatsdListener()
    yield s
    s.close()


def test_airflow_statsd_on_alone_turns_the_export_on_with_airflows_host_port_and_prefix():
    assert statsd_targets(validate(BASE), AIRFLOW_ON) == (StatsdTarget("airflow", "statsd.internal", 9125, "airflow.elasticity"),)
    assert statsd_targets(validate(BASE), {**AIRFLOW_ON, "AIRFLOW__METRICS__STATSD_ON": "False"}) == ()
    assert statsd_targets(validate(BASE), {}) == ()


def test_a_bad_airflow_statsd_port_names_airflows_option():
    with pytest.raises(
        ConfigError, match=r"AIRFLOW__METRICS__STATSD_PORT='81x5' \(Airflow's \[metrics\] statsd_port\): expected an integer"
    ):
        statsd_targets(validate(BASE), {**AIRFLOW_ON, "AIRFLOW__METRICS__STATSD_PORT": "81x5"})


def test_job_keys_win_over_airflows_and_an_empty_list_turns_the_export_off():
    config = validate({**BASE, "metrics.reporters": "statsd", "metrics.reporter.statsd.prefix": "team.orders"})
    assert statsd_targets(config, AIRFLOW_ON) == (StatsdTarget("statsd", "statsd.internal", 9125, "team.orders"),)
    assert statsd_targets(config, {}) == (StatsdTarget("statsd", "localhost", 8125, "team.orders"),)
    assert statsd_targets(validate({**BASE, "metrics.reporters": ""}), AIRFLOW_ON) == ()
    named = validate(
        {**BASE, "metrics.reporters": "dd", "metrics.reporter.dd.class": "statsd", "metrics.reporter.dd.port": "8126"}
    )
    assert statsd_targets(named, {}) == (StatsdTarget("dd", "localhost", 8126, "elasticity"),)


@pytest.mark.parametrize(
    "props,message",
    [
        ({"metrics.reporters": "prom"}, "metrics.reporter.prom.class is not set; expected it set to one of"),
        (
            {"metrics.reporters": "statsd,statsd"},
            "metrics.reporters='statsd,statsd': expected a comma-separated list of reporter names",
        ),
        ({"metrics.reporter.statsd.class": "graphite"}, "metrics.reporter.statsd.class='graphite': expected one of statsd"),
        ({"metrics.reporter.statsd.port": "99999"}, "metrics.reporter.statsd.port='99999': expected an integer from 1 to 65535"),
        ({"metrics.reporter.statsd.prefix": "a..b"}, "metrics.reporter.statsd.prefix='a..b': expected dot-separated names"),
    ],
)
def test_bad_reporter_config_names_the_key_and_the_allowed_values(props, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        validate({**BASE, **props})


def test_statsd_lines_are_packed_into_datagrams_without_losing_any(listener):
    reporter = StatsdReporter(StatsdTarget("statsd", "127.0.0.1", listener.port, "p"))
    reporter.send(Metric(f"job.task.t{i}.process-ns", 1000 + i) for i in range(200))
    reporter.close()
    lines = listener.until(lambda ls: len(ls) >= 200)
    assert lines == [f"p.job.task.t{i}.process-ns:{1000 + i}|g" for i in range(200)]
    assert len(listener.datagrams) > 1 and all(len(d) <= MAX_DATAGRAM for d in listener.datagrams)


def test_a_reporter_that_cannot_send_never_fails_the_work(caplog):
    reporters = Reporters([StatsdReporter(StatsdTarget("statsd", "no-such-host.invalid", 8125, "p"))])
    with caplog.at_level(logging.WARNING, logger="elasticity.metrics.reporters"):
        reporters.report([Metric("j.task-count", 4)])
    assert "metrics reporter 'statsd' (no-such-host.invalid:8125)" in caplog.text


def test_names_keep_only_statsd_safe_characters():
    assert metric_name("orders-job", "task", "Partition 3", "process-ns") == "orders-job.task.Partition_3.process-ns"
    assert metric_name("j", "task", "SystemStreamPartition [kafka, orders, 3]") == "j.task.SystemStreamPartition_kafka_orders_3"
    assert metric_name("j", "task", "Partition_3-1-4") == "j.task.Partition_3-1-4"


def test_a_batch_reports_per_message_and_per_task_figures():
    summary = BatchSummary(
        job="j",
        batch_id=7,
        generation=2,
        factor=2,
        records_read=30,
        processed=25,
        skipped=3,
        dead_lettered=2,
        lag_left=5,
        metrics={
            "keyhash-compute-ns": 310,
            "process-ns-per-message": per_message_ns(3_000_000 + 600_000, 30),
            "total-input-consumption-ns": 9_000,
            "commit-ns": 4_000,
            "task-count": 2,
            "process-ns": {"Partition_0-0-2": 3_000_000, "Partition_0-1-2": 600_000},
            "records": {"Partition_0-0-2": 20, "Partition_0-1-2": 10},
            "lag": {"kafka.orders.0.0": 5},
        },
    )
    lines = [m.line("p") for m in batch_metrics(summary)]
    assert lines == [
        "p.j.keyhash-compute-ns:310|g",
        "p.j.process-ns-per-message:120000|g",
        "p.j.total-input-consumption-ns:9000|g",
        "p.j.commit-ns:4000|g",
        "p.j.task-count:2|g",
        "p.j.lag:5|g",
        "p.j.records-read:30|c",
        "p.j.processed:25|c",
        "p.j.skipped-envelopes:3|c",
        "p.j.dead-lettered:2|c",
        "p.j.task.Partition_0-0-2.process-ns:3000000|g",
        "p.j.task.Partition_0-0-2.records:20|c",
        "p.j.task.Partition_0-0-2.process-ns-per-message:150000|g",
        "p.j.task.Partition_0-1-2.process-ns:600000|g",
        "p.j.task.Partition_0-1-2.records:10|c",
        "p.j.task.Partition_0-1-2.process-ns-per-message:60000|g",
    ]
    assert per_message_ns(5, 0) == 0


def test_every_rescale_records_its_job_model_and_checkpoint_times_in_the_store_and_over_statsd(listener):
    inputs = MemoryInputs()
    inputs.create(SystemStream("kafka", "orders"), 2)
    config = validate(
        {
            **BASE,
            "job.elasticity.factor": "2",
            "metrics.reporters": "statsd",
            "metrics.reporter.statsd.host": "127.0.0.1",
            "metrics.reporter.statsd.port": str(listener.port),
        }
    )
    store = CheckpointStore("sqlite://")
    coordinator = JobCoordinator(config, store, inputs)
    coordinator.initialize()  # the first generation is a rescale from nothing
    coordinator.rescale(4)
    assert coordinator.rescale(4).changes_nothing  # nothing written, nothing recorded

    rows = store.rescale_metrics("j")
    assert [(r["generation"], r["old-factor"], r["factor"], r["task-count"], r["origin"]) for r in rows] == [
        (1, None, 2, 4, "start"),
        (2, 2, 4, 8, "manual"),
    ]
    assert all(r["job-model-generation-ns"] > 0 and r["checkpoint-compute-ns"] > 0 for r in rows)
    listener.until(lambda ls: sum(".rescales:" in line for line in ls) == 2)
    assert listener.values("elasticity.j.job-model-generation-ns") == [f"{r['job-model-generation-ns']}|g" for r in rows]
    assert listener.values("elasticity.j.checkpoint-compute-ns") == [f"{r['checkpoint-compute-ns']}|g" for r in rows]
    assert listener.values("elasticity.j.task-count") == ["4|g", "8|g"]
    assert listener.values("elasticity.j.factor") == ["2|g", "4|g"]
