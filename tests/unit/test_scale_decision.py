"""One scale policy for the schedule, the autosizer and people, on the real SQL store."""

from datetime import UTC, datetime, timedelta

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream
from elasticity.scaling.decision import decide
from tests.support.memory import MemoryInputs


def _job(**props: str) -> tuple:
    inputs = MemoryInputs()
    inputs.create(SystemStream("kafka", "orders"), 2)
    config = validate({"job.name": "j", "task.inputs": "kafka.orders", "job.elasticity.factor": "2", **props})
    store = CheckpointStore("sqlite://")
    return config, store, JobCoordinator(config, store, inputs)


def test_nothing_before_the_first_batch_and_nothing_without_a_policy():
    config, store, coordinator = _job()
    assert decide(config, store, None, datetime.now(UTC)).reason == "the job has not started"
    current = coordinator.initialize()
    d = decide(config, store, current, datetime.now(UTC))
    assert (d.current, d.factor, d.applies) == (2, None, False)


def test_the_schedule_applies_unless_a_manual_rescale_holds():
    config, store, coordinator = _job(**{"job.elasticity.schedule": "* * * * * -> 4", "job.elasticity.manual.hold.ms": "60000"})
    coordinator.initialize()
    now = datetime.now(UTC)
    d = decide(config, store, coordinator.current(), now)
    assert (d.current, d.factor, d.origin, d.applies) == (2, 4, "schedule", True)

    coordinator.rescale(3, origin="manual")  # a person says 3: the schedule waits for the hold to pass
    held = decide(config, store, coordinator.current(), now)
    assert (held.current, held.factor, held.applies) == (3, 4, False)
    assert held.hold is not None and held.hold.factor == 3 and "held at 3 by a manual rescale" in held.reason

    later = decide(config, store, coordinator.current(), now + timedelta(minutes=2))
    assert (later.factor, later.hold, later.applies) == (4, None, True)
