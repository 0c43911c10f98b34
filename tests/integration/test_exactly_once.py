"""The exactly-once protocol for Kafka outputs against the real broker and a checkpoint store: a batch's
outputs show (read_committed) if and only if its checkpoint commits, whichever side a run dies on."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from elasticity.batch.sinks.exactly_once import ExactlyOnceOutputs, StagedBatches, StagedOutput, staging_root
from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA, write_batch_file
from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from elasticity.kafka.admin import create_topic
from tests.support.helpers import read_committed

IN = SystemStream("kafka", "orders")
SSP = SystemStreamPartition("kafka", "orders", 0)


@pytest.fixture
def job(kafka_bootstrap, tmp_path):
    """A job of one task with a 2-partition output topic staged under tmp_path, its first generation written."""
    name, out = f"eo-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    create_topic(kafka_bootstrap, out, 2)
    store = CheckpointStore(f"sqlite:///{tmp_path}/cp.db")
    model = build_job_model(validate({"job.name": name, "task.inputs": str(IN)}), {IN: 1})
    store.acquire_lease(name, "me", 60_000)
    store.write_generation(
        name,
        0,
        1,
        model=model,
        compute=lambda old: {t.task_name: TaskCheckpoint(task_name=t.task_name, offsets={SSP: 0}) for t in model.tasks()},
        owner="me",
        reason="first",
    )
    staged = StagedOutput(out, staging_root(str(tmp_path / "output"), "kafka", out))
    yield name, out, store, staged, model
    store.close()


def _run(kafka_bootstrap, job) -> ExactlyOnceOutputs:
    name, _, store, staged, _ = job
    return ExactlyOnceOutputs(
        job_name=name,
        job_id="1",
        system="kafka",
        kafka_for=lambda system: kafka_bootstrap,
        outputs=(staged,),
        store=store,
        write_versions=(1, 2),
        owner="me",
    )


def _batch(job, start: int, end: int, after: int | None = None):
    """Plan a batch over input offsets [start, end) (chained `after` a pending one) and stage its outputs: one
    per input, keyed by user."""
    name, _, store, staged, model = job
    plan = store.plan_batch(name, 1, (OffsetRange(SSP, start, end),), owner="me", after=after)
    task = next(iter(model.tasks())).task_name
    rows = {
        "key": [f"u{o % 3}".encode() for o in range(start, end)],
        "value": [f"{o}".encode() for o in range(start, end)],
        "task_name": [task.name] * (end - start),
        "batch_id": [plan.batch_id] * (end - start),
        "seq": list(range(end - start)),
        "source_partition": [0] * (end - start),
        "source_offset": list(range(start, end)),
        "source_system": ["kafka"] * (end - start),
        "source_stream": [SSP.stream] * (end - start),
        "generation": [1] * (end - start),
    }
    write_batch_file(staged.root, plan.batch_id, "slot-0", pa.table(rows, schema=OUTPUT_SCHEMA))
    return plan, [TaskCheckpoint(task_name=task, offsets={SSP: end})]


def _visible(bootstrap: str, topic: str) -> dict[bytes, list[int]]:
    """What a read_committed consumer of the whole topic sees: per key, the values in log order."""
    seen: dict[bytes, list[int]] = {}
    for _, key, value in read_committed(bootstrap, topic):
        seen.setdefault(key, []).append(int(value))
    return seen


def _offset(store, name) -> int:
    gen = store.generation(name)
    return next(iter(store.checkpoints(name, gen.number).values())).offsets[SSP]


def test_outputs_show_once_whichever_side_of_the_kafka_commit_a_run_dies(kafka_bootstrap, job):
    name, out, store, _, _ = job
    # run 1 commits batch 1 [0, 10) on both sides
    run = _run(kafka_bootstrap, job)
    assert run.start() == []
    plan, cps = _batch(job, 0, 10)
    assert run.commit(plan, cps, ()) == 10
    store.commit_batch(plan, cps, (1, 2), owner="me")
    # it commits batch 2 [10, 20) in Kafka and dies before the store's commit
    plan, cps = _batch(job, 10, 20)
    run.commit(plan, cps, ())
    del run
    # run 2 finishes batch 2 from the commit record: written, not replayed
    run = _run(kafka_bootstrap, job)
    assert [r.batch_ids for r in run.start()] == [(2,)]
    assert store.plan(name, 2)[1] == "committed" and _offset(store, name) == 20
    # it begins batch 3 [20, 30), its outputs in the log, and dies inside the transaction
    plan, cps = _batch(job, 20, 30)
    tx = run._tx
    tx._producer.begin_transaction()
    for r in StagedBatches.read(run.outputs, [3]).records():
        tx._produce(r.topic, r.key, r.value, r.headers)
    tx._producer.flush(30)
    del run, tx
    # run 3 fences it (aborted), finds nothing to roll forward, and the batch replays
    run = _run(kafka_bootstrap, job)
    assert run.start() == []
    assert store.plan(name, 3)[1] == "planned"
    plan3, cps3 = _batch(job, 20, 30)
    assert plan3.batch_id == 3  # the same plan, replayed
    run.commit(plan3, cps3, ())
    store.commit_batch(plan3, cps3, (1, 2), owner="me")
    run.close()
    assert store.open_transactional_ids(name) == []
    seen = _visible(kafka_bootstrap, out)
    assert sorted(v for vs in seen.values() for v in vs) == list(range(30))  # every output once
    assert all(vs == sorted(vs) for vs in seen.values())  # per key, in input order


def test_a_commit_covering_skipped_batches_carries_their_outputs_in_order(kafka_bootstrap, job):
    """An async commit folds the batches whose own commit was skipped: one transaction holds all their outputs."""
    name, out, store, _, _ = job
    run = _run(kafka_bootstrap, job)
    run.start()
    p1, _ = _batch(job, 0, 5)
    p2, cps2 = _batch(job, 5, 9, after=p1.batch_id)
    assert p2.batch_id == 2
    assert run.commit(p2, cps2, (1,)) == 9
    store.commit_batch(p2, cps2, (1, 2), owner="me", covers=(1,))
    run.close()
    seen = _visible(kafka_bootstrap, out)
    assert sorted(v for vs in seen.values() for v in vs) == list(range(9)) and all(vs == sorted(vs) for vs in seen.values())
