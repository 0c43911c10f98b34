"""Routing (record -> virtual task) and placement (virtual task -> process slot) are defined once, by the
engine's slots (`batch.container.reader.RouteTable`, `process_context.slot_of`), and the app test harness and
the model tests' reference runner run that code: a change of the rule changes what both route, so the model
tests prove the routing production runs."""

from __future__ import annotations

import pytest

from elasticity.batch.container import process_context, reader
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream
from elasticity.testing import TestRun
from tests.support.memory import MemoryInputs, ReferenceRunner

ORDERS = SystemStream("kafka", "orders")
FACTOR = 4
ALL_TO = 3  # the key bucket every record goes to under the changed rule


@pytest.fixture
def one_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's hash changed so that every record's key bucket is ALL_TO."""
    monkeypatch.setattr(reader, "record_hash", lambda key, offset: ALL_TO)


def bucket(task_name: str) -> str:
    """The key bucket of a virtual task's name (`Partition_<p>-<bucket>-<factor>`)."""
    return task_name.split("-")[1]


def reference_tasks() -> set[str]:
    inputs = MemoryInputs()
    inputs.create(ORDERS, 2)
    config = validate({"job.name": "j", "task.inputs": "kafka.orders", "job.elasticity.factor": str(FACTOR)})
    runner = ReferenceRunner(JobCoordinator(config, CheckpointStore("sqlite://"), inputs), inputs)
    runner.coordinator.initialize(None)
    for i in range(40):
        inputs.produce(ORDERS, b"key-%d" % i, b"v")
    runner.run_batch(10**6)
    assert len(runner.log) == 40
    return {p.task.name for p in runner.log}


def harness_tasks() -> set[str]:
    with TestRun("elasticity.apps.identity:build", inputs=["kafka.orders"], factor=FACTOR, partitions=2) as run:
        result = run.process([(f"key-{i}", {"i": i}) for i in range(40)])
    assert sum(t.processed for t in result.by_task.values()) == 40
    return {name for name, t in result.by_task.items() if t.processed}


def test_the_reference_runner_and_the_harness_spread_records_over_the_buckets():
    assert len({bucket(name) for name in reference_tasks()}) > 1
    assert len({bucket(name) for name in harness_tasks()}) > 1


def test_the_reference_runner_routes_with_the_engines_rule(one_bucket):
    assert {bucket(name) for name in reference_tasks()} == {str(ALL_TO)}


def test_the_harness_routes_with_the_engines_rule(one_bucket):
    assert {bucket(name) for name in harness_tasks()} == {str(ALL_TO)}


def test_the_harness_and_the_reference_runner_call_the_engines_functions():
    from elasticity import testing
    from tests.support import memory

    assert testing.slot_of is process_context.slot_of and testing.slot_tasks is process_context.slot_tasks
    assert testing.route is reader.route is memory.route
    assert testing.RouteTable is reader.RouteTable is memory.RouteTable and testing.SlotReads is reader.SlotReads
