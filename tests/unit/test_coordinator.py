"""The coordinator's generations with the real SQL store and the in-memory stream."""

import logging

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from tests.support.memory import MemoryInputs, ReferenceRunner

ORDERS = SystemStream("kafka", "orders")


def _runner(**props: str) -> ReferenceRunner:
    inputs = MemoryInputs()
    inputs.create(ORDERS, 2)
    config = validate({"job.name": "j", "task.inputs": "kafka.orders", "job.elasticity.factor": "2", **props})
    return ReferenceRunner(JobCoordinator(config, CheckpointStore("sqlite://"), inputs), inputs)


def _produce(runner: ReferenceRunner, n: int, tag: str) -> None:
    for i in range(n):
        runner.inputs.produce(ORDERS, b"key-%d" % i, tag.encode())


def test_partitions_added_later_start_at_their_oldest_offset_under_the_default(caplog):
    runner = _runner()  # systems.kafka.default.stream.samza.offset.default unset: upcoming
    _produce(runner, 10, "before the job")
    runner.run_batch(1000)  # the first generation starts at the end: these 10 are not the job's
    assert runner.log == []

    runner.inputs.add_partitions(ORDERS, 2)
    _produce(runner, 40, "after")  # some land in the new partitions before the job discovers them
    new = [SystemStreamPartition("kafka", "orders", p) for p in (2, 3)]
    assert all(runner.inputs.topics[ORDERS][s.partition] for s in new)
    with caplog.at_level(logging.INFO, logger="elasticity"):
        runner.drain()

    done = {(p.ssp, p.offset) for p in runner.log}
    for ssp in new:
        assert {(ssp, o) for o in range(len(runner.inputs.topics[ORDERS][ssp.partition]))} <= done
    assert len(runner.log) == 40  # every record written after the start, each once
    runner.assert_no_duplicates()
    assert "new input partition kafka.orders.2 starts at offset 0" in caplog.text
    assert "new input partition kafka.orders.3 starts at offset 0" in caplog.text
    assert runner.coordinator.current().number == 2 and runner.coordinator.current().factor == 2


def test_offset_default_still_decides_the_first_generation():
    runner = _runner(**{"systems.kafka.default.stream.samza.offset.default": "oldest"})
    _produce(runner, 10, "before the job")
    runner.drain()
    runner.assert_everything_processed_once()


def test_a_rescale_plan_names_the_new_partitions_and_their_start():
    runner = _runner()
    runner.coordinator.initialize()
    runner.inputs.add_partitions(ORDERS, 1)
    _produce(runner, 30, "x")
    plan = runner.coordinator.plan_rescale(4)
    assert "new input partition kafka.orders.2 starts at offset 0" in plan.migration.describe()


def test_a_rescale_decided_on_an_older_generation_changes_nothing():
    """The schedule decided at generation 1; a person rescaled to 3 before it took the lease: its rescale to 4
    is refused, and the person's factor stays."""
    import pytest

    from elasticity.checkpoint.store import StaleGenerationError

    runner = _runner()
    coordinator = runner.coordinator
    decided_on = coordinator.initialize("first").number
    coordinator.rescale(3, "a person")
    with pytest.raises(StaleGenerationError, match=rf"decided on generation {decided_on}, but the job is at generation 2"):
        coordinator.rescale(4, "schedule", expected_generation=decided_on)
    assert coordinator.current().factor == 3
    assert coordinator.rescale(4, "schedule", expected_generation=2).factor == 4


def _batch_start(tmp_path, caplog, first_factor: str, **props: str) -> tuple[list[str], object]:
    """A job's first generation at `first_factor`, then two batches' starts in the engine (no Spark: only its
    step that reads the current generation) under a config of `props`, on the same SQLite store; the warnings
    of those batches."""
    from types import SimpleNamespace

    from elasticity.spark.engine import MicroBatchEngine

    tmp_path.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    inputs = MemoryInputs()
    inputs.create(ORDERS, 2)
    job = {"job.name": "j", "task.inputs": "kafka.orders"}
    JobCoordinator(validate({**job, "job.elasticity.factor": first_factor}), CheckpointStore(url), inputs).initialize()
    engine = MicroBatchEngine(validate({**job, **props}), spark=None, store=CheckpointStore(url), inputs=inputs)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="elasticity"):
        generation, cps, _ = engine._start("a batch", None)
        engine._start("a batch", (SimpleNamespace(generation=generation.number), cps))  # chained behind its upload
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING], generation


def test_a_factor_changed_after_the_first_generation_is_not_read_and_each_batch_says_so(tmp_path, caplog):
    warnings, generation = _batch_start(tmp_path, caplog, "2", **{"job.elasticity.factor": "4"})
    assert generation.factor == 2  # job.elasticity.factor is the initial factor only
    said = (
        "job 'j': job.elasticity.factor=4 is not read: the job runs at factor 2 (generation 1), and the key sets only a "
        "new job's factor. To run at 4, rescale: the elastic_rescale DAG, or `elasticity rescale --config <the job's "
        "file> --factor 4`; or set the key to 2 to say what runs"
    )
    assert warnings == [said, said]  # once per batch


def test_no_factor_warning_when_the_config_names_the_running_factor_or_a_policy_chooses_it(tmp_path, caplog):
    assert _batch_start(tmp_path / "same", caplog, "2", **{"job.elasticity.factor": "2"})[0] == []
    autosized = {"job.elasticity.factor": "4", "job.elasticity.autosize": "true"}
    assert _batch_start(tmp_path / "autosize", caplog, "2", **autosized)[0] == []
    scheduled = {"job.elasticity.factor": "4", "job.elasticity.schedule": "0 8 * * * -> 8"}
    assert _batch_start(tmp_path / "schedule", caplog, "2", **scheduled)[0] == []
