"""Job identity beside the sinks: a reset or foreign checkpoint store cannot write into old sinks silently."""

import json
import time
from pathlib import Path

import pytest

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.sinks.sink_identity import IDENTITY_FILE, IdentityMismatch, guard_sinks, store_identity
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream
from tests.support.helpers import job_props
from tests.support.memory import MemoryInputs


@pytest.fixture
def start(tmp_path):
    inputs = MemoryInputs()
    inputs.create(SystemStream("kafka", "orders"), 2)

    def start(store_file: str, reset: bool = False, job: str = "j"):
        props = job_props(job, "orders", tmp_path)
        config = validate({**props, "task.checkpoint.store.url": f"sqlite:///{tmp_path / store_file}"})
        store = CheckpointStore(config.checkpoint_store_url())
        coordinator = JobCoordinator(config, store, inputs)
        return guard_sinks(config, store, coordinator.initialize, reset=reset), store, config

    return start


def test_a_new_job_marks_its_sinks_and_starts_again_freely(start, tmp_path):
    moved, store, config = start("a.db")
    assert moved == [] and store.generation("j", 1) is not None
    for root in ("out", "audit", "dlq"):
        written = json.loads((tmp_path / root / IDENTITY_FILE).read_text())
        assert written["job_name"] == "j" and written["first_generation_ms"] == store.generation("j", 1).created_ms
    assert start("a.db")[0] == []


@pytest.mark.parametrize("reason", ["reset", "other database"])
def test_a_store_that_does_not_know_the_sinks_fails_naming_both(start, tmp_path, reason):
    _, first, config = start("a.db")
    if reason == "other database":  # where the same job was created at another moment
        time.sleep(0.002)
        other = validate({**config.raw_map, "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'b.db'}"})
        inputs = MemoryInputs()
        inputs.create(SystemStream("kafka", "orders"), 2)
        JobCoordinator(other, CheckpointStore(other.checkpoint_store_url()), inputs).initialize()
    with pytest.raises(IdentityMismatch) as e:
        start("b.db")
    message = str(e.value)
    assert "a.db" in message and "b.db" in message and "--reset-sinks" in message
    assert f"({store_identity(config, first).first_generation_ms})" in message
    if reason == "reset":
        assert CheckpointStore(f"sqlite:///{tmp_path / 'b.db'}").generation("j") is None  # nothing created on the way


def test_reset_sinks_moves_the_old_outputs_aside(start, tmp_path):
    start("a.db")
    (tmp_path / "out" / "orders").mkdir()
    (tmp_path / "out" / "orders" / "old.parquet").write_bytes(b"old")
    moved, store, _ = start("b.db", reset=True)
    assert sorted(m.rsplit("/", 1)[1].split(".reset-")[0] for m in moved) == ["audit", "dlq", "out"]
    aside = next(m for m in moved if m.rsplit("/", 1)[1].startswith("out."))
    assert (Path(aside) / "orders" / "old.parquet").read_bytes() == b"old"
    now = json.loads((tmp_path / "out" / IDENTITY_FILE).read_text())
    assert now["first_generation_ms"] == store.generation("j", 1).created_ms
    assert start("b.db")[0] == []  # and the new store now owns them
