"""A Python worker's state across batches (ContainerProcess): one per process from its first use, the app loaded
once until the user's code changes, and a fresh one (a new worker's) closes the one it replaces."""

from elasticity.batch.container.container_process import container_process, fresh_container_process
from elasticity.jobmodel.model import SystemStream

INPUTS = (SystemStream("kafka", "orders"),)


class _Client:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_one_container_process_per_process_until_a_fresh_one_closes_it():
    first = container_process()
    assert container_process() is first
    consumer = _Client()
    first.consumers["127.0.0.1:1"] = consumer
    first.threads(2)
    second = fresh_container_process()
    assert second is not first and container_process() is second
    assert consumer.closed and not first.consumers
    assert first.pool is None


def test_an_app_is_loaded_once_per_process_until_its_code_changes():
    process = fresh_container_process()
    app = process.application("tests.unit.test_processing:double_app", INPUTS)
    assert process.application("tests.unit.test_processing:double_app", INPUTS) is app
    process.forget_applications()  # shipped code replaced it
    assert process.application("tests.unit.test_processing:double_app", INPUTS) is not app
