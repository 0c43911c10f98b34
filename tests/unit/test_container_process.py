"""A Python worker's state across batches (ContainerProcess): one per process from its first use, the app loaded
once until the user's code changes, and closed (its consumers and threads with it) when the process registry
closes, after which the next use makes a new one, as a new worker has."""

from elasticity.batch.container.container_process import container_process
from elasticity.jobmodel.model import SystemStream
from elasticity.process_registry import PROCESS

INPUTS = (SystemStream("kafka", "orders"),)


class _Client:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_one_container_process_per_process_until_the_registry_closes_it():
    first = container_process()
    assert container_process() is first
    consumer = _Client()
    first.consumers["127.0.0.1:1"] = consumer
    first.threads(2)
    PROCESS.close()
    assert consumer.closed and not first.consumers
    assert first.pool is None
    second = container_process()
    assert second is not first and container_process() is second


def test_an_app_is_loaded_once_per_process_until_its_code_changes():
    PROCESS.close()
    process = container_process()
    app = process.application("tests.unit.test_processing:double_app", INPUTS)
    assert process.application("tests.unit.test_processing:double_app", INPUTS) is app
    process.forget_applications()  # shipped code replaced it
    assert process.application("tests.unit.test_processing:double_app", INPUTS) is not app
