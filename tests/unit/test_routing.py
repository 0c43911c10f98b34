"""Routing (record -> virtual task, `batch.container.routing.route_records`) and placement (virtual task ->
process slot, `process_context.slot_of`, with what each slot reads and the state it starts from) are defined
once, by the engine; the app test harness and the model tests' reference runner run that code. A change of the
rule changes what all of them route, and a broken rule fails the model tests: they prove the routing production
runs."""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from elasticity.batch.container import process_context, reader, routing
from elasticity.batch.coordinator import outcome, planning
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.batch_plan import BatchPlan, OffsetRange
from elasticity.checkpoint.store import CheckpointStore, Generation
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from elasticity.testing import TestRun
from tests.support.library import library_modules
from tests.support.memory import MemoryInputs, ReferenceRunner
from tests.unit.test_checkpoint_rescale_machine import RescaleMachine

ORDERS = SystemStream("kafka", "orders")
FACTOR = 4
ALL_TO = 3  # the key bucket every record goes to under the changed hash
KEYS = [b"key-%d" % i for i in range(40)]


def everywhere(monkeypatch: pytest.MonkeyPatch, original: object, replacement: object) -> list[str]:
    """`original` replaced by `replacement` in every module of the library and the tests that bound it (a
    `from ... import` makes a binding of its own); the modules, by name."""
    patched = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("elasticity", "tests") and module is not None:
            for attr, value in list(vars(module).items()):
                if value is original:
                    monkeypatch.setattr(module, attr, replacement)
                    patched.append(name)
    return patched


def spy(monkeypatch: pytest.MonkeyPatch, original: Callable[..., Any]) -> list[str]:
    """Every call of `original`, wherever it is bound, recorded (by the function's name) and passed on."""
    calls: list[str] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append(original.__name__)
        return original(*args, **kwargs)

    everywhere(monkeypatch, original, recorded)
    return calls


def bucket(task_name: str) -> str:
    """The key bucket of a virtual task's name (`Partition_<p>-<bucket>-<factor>`)."""
    return task_name.split("-")[1]


def engine_tasks(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The tasks of the records the engine's slots keep (`slot_reads`, `SlotReads.read`: the reader's route), the
    Kafka fetch alone served from memory."""

    def fetched(chunks):
        for c in chunks:
            cols = {"offset": list(range(c.start, c.end)), "key": KEYS[c.start : c.end]}
            yield c, {**cols, "value": [b"v"] * len(cols["key"]), "timestamp": [0] * len(cols["key"])}

    monkeypatch.setattr(reader, "read_chunks", fetched)
    config = validate({"job.name": "j", "task.inputs": "kafka.orders", "job.elasticity.factor": str(FACTOR)})
    model = build_job_model(config, {ORDERS: 1})
    cps = {
        t.task_name: TaskCheckpoint.of_offsets(t.task_name, dict.fromkeys(t.system_stream_partitions, 0)) for t in model.tasks()
    }
    slots = process_context.slot_of(model, 2)
    generation = Generation(job_name="j", number=1, factor=FACTOR, job_model=model, reason="test", created_ms=0)
    plan = BatchPlan(
        job_name="j", batch_id=1, generation=1, ranges=(OffsetRange(SystemStreamPartition("kafka", "orders", 0), 0, 40),)
    )
    reads = process_context.slot_reads(config, plan, generation, cps, slots=slots, bootstraps={"kafka": "127.0.0.1:9092"})
    kept = [name for slot in set(slots.values()) for name in reads.read(slot)[0].column("task_name").to_pylist()]
    assert len(kept) == 40
    return set(kept)


def reference_tasks() -> set[str]:
    inputs = MemoryInputs()
    inputs.create(ORDERS, 2)
    config = validate({"job.name": "j", "task.inputs": "kafka.orders", "job.elasticity.factor": str(FACTOR)})
    runner = ReferenceRunner(JobCoordinator(config, CheckpointStore("sqlite://"), inputs), inputs)
    runner.coordinator.initialize(None)
    for key in KEYS:
        inputs.produce(ORDERS, key, b"v")
    runner.run_batch(10**6)
    assert len(runner.log) == 40
    return {p.task.name for p in runner.log}


def harness_tasks() -> set[str]:
    with TestRun("elasticity.apps.identity:build", inputs=["kafka.orders"], factor=FACTOR, partitions=2) as run:
        result = run.process([(f"key-{i}", {"i": i}) for i in range(40)])
    assert sum(t.processed for t in result.by_task.values()) == 40
    return {name for name, t in result.by_task.items() if t.processed}


def test_the_engine_the_reference_runner_and_the_harness_spread_records_over_the_buckets(monkeypatch):
    for tasks in (engine_tasks(monkeypatch), reference_tasks(), harness_tasks()):
        assert len({bucket(name) for name in tasks}) > 1


def test_a_changed_hash_changes_what_all_three_route(monkeypatch):
    monkeypatch.setattr(routing, "record_hash", lambda key, offset: ALL_TO)
    for tasks in (engine_tasks(monkeypatch), reference_tasks(), harness_tasks()):
        assert {bucket(name) for name in tasks} == {str(ALL_TO)}


def test_the_engine_the_reference_runner_and_the_harness_call_the_one_routing_function(monkeypatch):
    assert reader.route_records is routing.route_records
    assert sys.modules["tests.support.memory"].route_records is routing.route_records
    calls = spy(monkeypatch, routing.route_records)
    for run in (lambda: engine_tasks(monkeypatch), reference_tasks, harness_tasks):
        calls.clear()
        run()
        assert calls, f"{run} routed without route_records"


def test_the_harness_places_reads_and_advances_with_the_engines_functions(monkeypatch):
    """The harness's placement, slot reads, state layout, plan and checkpoints are the engine's own functions: the
    very objects `spark.engine` imports, and each called by a batch of a stateful app."""
    engine = library_modules()["elasticity.spark.engine"]
    imported = {
        (node.module, a.name)
        for node in ast.walk(ast.parse(engine.read_text()))
        if isinstance(node, ast.ImportFrom)
        for a in node.names
    }
    shared = {
        process_context: ("slot_of", "slot_reads", "batch_state"),
        outcome: ("new_checkpoints",),
        planning: ("plan_ranges",),
    }
    calls = {}
    for module, names in shared.items():
        for name in names:
            assert (module.__name__, name) in imported, f"spark.engine does not use {module.__name__}.{name}"
            calls[name] = spy(monkeypatch, getattr(module, name))
    with TestRun("elasticity.apps.enrichment:build_stateful", inputs=["kafka.orders"], factor=FACTOR, partitions=2) as run:
        run.process([("user-1", {"key": "user-1", "amount": 5})])
    assert all(calls.values()), f"the harness did not call {sorted(n for n, c in calls.items() if not c)}"


# Mutants of the routing rule: (the function, the text of its source changed, what it becomes). Each is a rule
# that is wrong in one way; the model tests must fail under every one.
MUTANTS = {
    "another key bucket": (routing.route_records, "b = h % factor if", "b = (h + 1) % factor if"),
    "merge watermarks ignored": (routing.route_records, "(marks and any(w.covers(h, offset) for w in marks))", "False"),
    "the task's next record taken as processed": (routing.route_records, "offset < first", "offset <= first"),
    "a watermark's comparison flipped": (Watermark.covers, "offset < self.offset", "offset > self.offset"),
}


def mutant(function: Callable[..., Any], old: str, new: str) -> Callable[..., Any]:
    """`function` compiled again from its source with `old` (found exactly once) replaced by `new`."""
    source = textwrap.dedent(inspect.getsource(function))
    assert source.count(old) == 1, f"the mutation {old!r} no longer applies to {function.__qualname__}"
    namespace = dict(function.__globals__)
    exec(compile("from __future__ import annotations\n" + source.replace(old, new), "<mutant>", "exec"), namespace)
    return namespace[function.__name__]


def rescale_machine_failure() -> AssertionError:
    """The model test of rescales (tests/unit/test_checkpoint_rescale_machine.py) run as it runs, its examples
    drawn the same each time; the assertion it fails on."""
    with pytest.raises(AssertionError) as failed:
        run_state_machine_as_test(
            RescaleMachine,
            settings=settings(
                max_examples=200,
                stateful_step_count=30,
                deadline=None,
                derandomize=True,
                database=None,
                phases=(Phase.generate,),
                report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck),
                print_blob=False,
            ),
        )
    return failed.value


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_broken_routing_rule_fails_the_model_tests(name, monkeypatch):
    function, old, new = MUTANTS[name]
    broken = mutant(function, old, new)
    if function is Watermark.covers:
        monkeypatch.setattr(Watermark, "covers", broken)
    else:
        assert {"elasticity.batch.container.reader", "tests.support.memory"} <= set(everywhere(monkeypatch, function, broken))
    failure = rescale_machine_failure()
    print(f"{name}: {failure}")
