"""Two attempts of one run alive side by side, on the real broker, Spark and a SQLite and a PostgreSQL store: the
first paused (a worker cut off, a paused VM) while its lease expires, the second taking over and killed after
its cleanup, then the first resumed. Its commit (or its rescale's generation) is refused as superseded, every
committed batch keeps its outputs and audit rows (the committed generation its snapshots), and a third attempt
completes the job with nothing lost, nothing twice and each key's order kept."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from elasticity import faults
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.store import CheckpointStore, Lease, SupersededError
from elasticity.checkpoint.store.attempt_token import attempt_owner
from elasticity.config import validate
from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import KafkaInputs
from elasticity.quality.runner import run_quality
from elasticity.spark.engine import MicroBatchEngine
from tests.integration.test_engine import assert_exactly_once_in_order, feed
from tests.integration.test_stateful_engine import STATEFUL, assert_state_and_outputs, state_check_passes

TTL_MS = 1500


class Pause:
    """Attempt 1 held at a fault point, all of it: its lease renewals wait too (`PausedStore`), so its lease
    expires as a paused process's does."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.reached, self.resume = threading.Event(), threading.Event()

    def at(self, name: str) -> None:
        if name == self.point and threading.current_thread().name == "attempt-1" and not self.reached.is_set():
            self.reached.set()
            assert self.resume.wait(300)

    def hold(self) -> None:
        if self.reached.is_set():
            assert self.resume.wait(300)


class PausedStore(CheckpointStore):
    """Attempt 1's store: once the attempt is paused, its lease renewals wait with it."""

    pause: Pause

    def acquire_lease(self, job: str, owner: str, ttl_ms: int) -> Lease:
        self.pause.hold()
        return super().acquire_lease(job, owner, ttl_ms)


def paused_store(url: str, pause: Pause) -> PausedStore:
    store = PausedStore(url)
    store.pause = pause
    return store


class Attempt(threading.Thread):
    """Attempt 1 on a thread of its own; what it raised is kept."""

    def __init__(self, body) -> None:
        super().__init__(name="attempt-1", daemon=True)
        self.body, self.error = body, None

    def run(self) -> None:
        try:
            self.body()
        except BaseException as e:  # noqa: BLE001 - the test reads it
            self.error = e


def kill_at(name: str):
    """Attempt 2 dies at `name` (on the test's own thread); attempt 1's pause stays in force."""

    def at(point: str, pause: Pause) -> None:
        pause.at(point)
        if point == name and threading.current_thread() is threading.main_thread():
            raise faults.InjectedFault(point)

    return at


def expire(store: CheckpointStore, job: str) -> None:
    deadline = time.monotonic() + 30
    while store.lease(job) is not None:
        assert time.monotonic() < deadline, "attempt 1's lease never expired"
        time.sleep(0.1)


def props_for(kafka_bootstrap, tmp_path, monkeypatch, store_url, prefix: str, partitions: int = 3) -> tuple[str, dict]:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    monkeypatch.setenv("DEMO_LOOKUP_MS", "0")
    return topic, {
        "job.name": f"{prefix}-{topic}",
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "job.container.count": "2",
        "job.container.thread.pool.size": "64",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "app.class": "elasticity.apps.enrichment:build_async",
        "task.max.concurrency": "16",
        "task.checkpoint.store.url": store_url,
        "job.lease.ttl.ms": str(TTL_MS),
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
        "job.report.path": str(tmp_path / "reports"),
    }


def test_a_paused_attempts_commit_is_refused_after_its_successor_cleaned_and_died(
    spark, kafka_bootstrap, tmp_path, monkeypatch, store_url
):
    topic, props = props_for(kafka_bootstrap, tmp_path, monkeypatch, store_url, "fence")
    feed(kafka_bootstrap, topic, 600, seed=41)
    config = validate(props)
    job, run = config.job_name, f"manual__{uuid.uuid4().hex[:6]}"
    MicroBatchEngine(config, spark, CheckpointStore(store_url)).run(max_records=200, owner=attempt_owner(run, 0))

    pause = Pause("commit.before_fence")
    first = MicroBatchEngine(config, spark, paused_store(store_url, pause))
    one = Attempt(lambda: first.run(max_records=200, owner=attempt_owner(run, 1)))
    second = CheckpointStore(store_url)
    with faults.hook(lambda p: kill_at("replay.cleaned")(p, pause)):
        one.start()
        assert pause.reached.wait(300), one.error
        audit = config.get("job.audit.path")
        assert len(read_table(audit, AUDIT_SCHEMA, [2])) > 0  # attempt 1 wrote batch 2, and waits to commit it
        expire(second, job)
        with pytest.raises(faults.InjectedFault):
            MicroBatchEngine(config, spark, second).run(max_records=200, owner=attempt_owner(run, 2))
        assert second.pending_plan(job).batch_id == 2
        assert len(read_table(audit, AUDIT_SCHEMA, [2])) == 0  # attempt 2's replay removed them, then died
        pause.resume.set()
        one.join(300)
    assert isinstance(one.error, SupersededError), one.error
    assert one.error.current_epoch is not None and one.error.current_epoch > one.error.epoch
    assert second.batches_with_status(job, "committed") == [1]  # batch 2 was refused, nothing of it committed

    result, _ = run_quality(config, second, KafkaInputs(config), report_dir=tmp_path / "dq")
    assert result.success, result.failure_message()
    for batch in second.batches_with_status(job, "committed"):
        assert len(read_table(audit, AUDIT_SCHEMA, [batch])) > 0
        assert len(read_table(f"{config.get('job.output.path')}/enriched", OUTPUT_SCHEMA, [batch])) > 0

    third = MicroBatchEngine(config, spark, CheckpointStore(store_url))
    summaries = third.run(until_caught_up=True, owner=attempt_owner(run, 3))
    assert summaries[0].replayed and summaries[0].batch_id == 2 and summaries[-1].lag_left == 0
    audit_rows, _ = assert_exactly_once_in_order(third.store, config, kafka_bootstrap)
    assert len(audit_rows) == 600 + 3
    result, _ = run_quality(config, third.store, KafkaInputs(config), report_dir=tmp_path / "dq-after")
    assert result.success, result.failure_message()


def test_a_paused_rescale_is_refused_after_its_successor_cleaned_its_move(
    spark, kafka_bootstrap, tmp_path, monkeypatch, store_url
):
    topic, props = props_for(kafka_bootstrap, tmp_path, monkeypatch, store_url, "fence-state", partitions=2)
    props.update(
        {
            "app.class": STATEFUL,
            "task.checkpoint.read.versions": "2,1",
            "stores.totals.backup.factories": "blobstore",
            "blob.store.uri": str(tmp_path / "blobs"),
            "job.state.dir": str(tmp_path / "state"),
            "task.commit.timeout.ms": "60000",
        }
    )
    feed(kafka_bootstrap, topic, 300, seed=43)
    config = validate(props)
    job, run = config.job_name, f"manual__{uuid.uuid4().hex[:6]}"
    base = MicroBatchEngine(config, spark, CheckpointStore(store_url))
    base.run(max_records=100, until_caught_up=True, owner=attempt_owner(run, 0))
    inputs = KafkaInputs(config)

    pause = Pause("rescale.state.moved")
    one = Attempt(lambda: JobCoordinator(config, paused_store(store_url, pause), inputs).rescale(4, attempt_owner(run, 1)))
    second = CheckpointStore(store_url)
    with faults.hook(lambda p: kill_at("rescale.state.stale_cleaned")(p, pause)):
        one.start()
        assert pause.reached.wait(300), one.error  # its snapshots are uploaded, its generation not yet written
        expire(second, job)
        with pytest.raises(faults.InjectedFault):
            JobCoordinator(config, second, inputs).rescale(4, attempt_owner(run, 2))
        pause.resume.set()
        one.join(300)
    assert isinstance(one.error, SupersededError), one.error
    assert second.generation(job).factor == 2  # no generation names the snapshots attempt 2 removed
    state_check_passes(config, second, inputs)  # every snapshot the committed generation names is there

    third = CheckpointStore(store_url)
    config = config.with_overrides({"job.lease.ttl.ms": "120000"})  # a whole move fits in its lease (a rescale renews none)
    assert JobCoordinator(config, third, inputs).rescale(4, attempt_owner(run, 3)).state is not None
    state_check_passes(config, third, inputs)
    feed(kafka_bootstrap, topic, 100, seed=44)
    assert MicroBatchEngine(config, spark, third).run(max_records=80, until_caught_up=True)[-1].lag_left == 0
    assert_state_and_outputs(config, third)
