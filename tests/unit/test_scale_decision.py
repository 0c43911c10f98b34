"""One scale policy for the schedule, the autosizer and people, on the real SQL store."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream
from elasticity.scaling.decision import AutosizeRecord, Observed, decide, observed_from_batches, past_rescales
from elasticity.scaling.ds2 import HighWatermarks, input_rate
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


# --- the autosizer: the DS2 controller on the store's own batch metrics -----------------------------------


def _batch(store, coordinator, batch_id: int, *, finished_ms: int, per_task: int, busy_ms: int, lag_left: int, total_ms: int):
    """A committed batch's summary as a run records it: each virtual task `per_task` records in `busy_ms`."""
    g = coordinator.current()
    tasks = [t.task_name.name for t in g.job_model.tasks()]
    summary = {
        "job": "j",
        "batch_id": batch_id,
        "generation": g.number,
        "factor": g.factor,
        "finished_ms": finished_ms,
        "records_read": per_task * len(tasks),
        "kept": per_task * len(tasks),
        "lag_left": lag_left,
        "lag_left_exact": True,
        "durations_ms": {"total": total_ms, "process": busy_ms},
        "metrics": {"records": dict.fromkeys(tasks, per_task), "process-ns": dict.fromkeys(tasks, busy_ms * 1_000_000)},
    }
    store.record_metrics("j", batch_id, g.number, json.dumps(summary))


def _autosized(**props: str):
    return _job(
        **{
            "job.elasticity.autosize": "true",
            "job.elasticity.autosize.max": "12",
            "job.elasticity.autosize.scale.up.cooldown.ms": "0",
            "job.elasticity.autosize.scale.down.cooldown.ms": "0",
            "job.elasticity.autosize.catch.up.seconds": "60",  # the backlog drained within the lag target's minute
            **props,
        }
    )


def test_the_autosizer_waits_for_a_measured_batch_and_an_input_rate():
    config, store, coordinator = _autosized()
    current = coordinator.initialize()
    now = datetime.now(UTC)
    d = decide(config, store, current, now)
    assert (d.factor, d.applies, d.origin, d.record) == (2, False, "autosize", None) and "no batch measured" in d.reason
    _batch(store, coordinator, 1, finished_ms=0, per_task=50, busy_ms=1000, lag_left=0, total_ms=1000)
    one = Observed(behind=0, exact=True, watermarks=(HighWatermarks(1000, 10),))
    assert "input rate is not measured" in decide(config, store, current, now, observed=one).reason


def test_the_autosizer_sizes_for_the_input_rate_and_the_backlog_and_records_why():
    # 2 partitions at factor 2: 4 virtual tasks of 50 records per busy second each, evenly loaded (a pool of 64
    # threads does not bound them): capacity(F) = 50 * 2 * F = 100 F records/s
    config, store, coordinator = _autosized()
    current = coordinator.initialize()
    _batch(store, coordinator, 1, finished_ms=1, per_task=50, busy_ms=1000, lag_left=0, total_ms=1000)
    now = datetime.now(UTC)
    at = int(now.timestamp() * 1000)
    # 420 records/s arrive, 6,000 behind: (420 + 6,000 / 60) / 0.7 = 743 records/s: factor 8 (800)
    observed = Observed(behind=6000, exact=True, watermarks=(HighWatermarks(at - 10_000, 0), HighWatermarks(at, 4200)))
    d = decide(config, store, current, now, observed=observed)
    assert (d.current, d.factor, d.applies, d.generation) == (2, 8, True, current.number)
    r = d.record
    assert r is not None and (r.needed, r.input_rate, r.behind, r.task_rate) == (8, 420.0, 6000, 50.0)
    assert abs(r.demand - 520 / 0.7) < 1e-9 and dict(r.capacity)[8] == 800.0 and r.scalability == 1.0
    assert AutosizeRecord.from_json(r.to_json()) == r  # kept with the generation as it was decided

    # an hour later 100 records/s arrive: (100 + 0 / 60) / 0.7 = 143 records/s, factor 2; but with 7,000 behind,
    # more than 60 s of input (lag above target), it does not scale down (demand 310 would need factor 4)
    coordinator.rescale(8, origin="autosize", expected_generation=current.number, decision=r.to_json())
    moved = coordinator.current()
    assert (moved.origin, AutosizeRecord.from_json(moved.decision or "")) == ("autosize", r)
    _batch(store, coordinator, 2, finished_ms=2, per_task=50, busy_ms=1000, lag_left=0, total_ms=1000)
    later = now + timedelta(hours=1)
    ms = at + 3_600_000
    slow = (HighWatermarks(ms - 10_000, 0), HighWatermarks(ms, 1000))
    assert decide(config, store, moved, later, observed=Observed(behind=0, exact=True, watermarks=slow)).factor == 2
    held = decide(config, store, moved, later, observed=Observed(behind=7000, exact=True, watermarks=slow))
    assert held.factor == 8 and "above target" in held.reason


def test_the_batches_overhead_outside_their_process_stage_asks_for_more():
    # as above, but each batch of 200 records (batch.max.records) spends 0.1 s outside its 1 s process stage:
    # capacity(F) = 200 / (0.1 + 200 / (100 F)), factor 8 571 records/s and 12 the first to cover 743
    config, store, coordinator = _autosized(**{"batch.max.records": "200"})
    current = coordinator.initialize()
    _batch(store, coordinator, 1, finished_ms=1, per_task=50, busy_ms=1000, lag_left=0, total_ms=1100)
    now = datetime.now(UTC)
    at = int(now.timestamp() * 1000)
    observed = Observed(behind=6000, exact=True, watermarks=(HighWatermarks(at - 10_000, 0), HighWatermarks(at, 4200)))
    r = decide(config, store, current, now, observed=observed).record
    assert r is not None and (r.factor, r.batch_records, r.batch_overhead_s) == (12, 200, 0.1)
    assert dict(r.capacity)[8] == pytest.approx(571.43, abs=0.01) and dict(r.capacity)[11] < r.demand <= dict(r.capacity)[12]
    assert AutosizeRecord.from_json(r.to_json()) == r


def test_a_manual_rescale_holds_against_the_autosizer():
    config, store, coordinator = _autosized(**{"job.elasticity.manual.hold.ms": "3600000"})
    coordinator.initialize()
    coordinator.rescale(3, origin="manual")
    _batch(store, coordinator, 1, finished_ms=1, per_task=50, busy_ms=1000, lag_left=0, total_ms=1000)
    now = datetime.now(UTC)
    at = int(now.timestamp() * 1000)
    load = Observed(behind=6000, exact=True, watermarks=(HighWatermarks(at - 10_000, 0), HighWatermarks(at, 4200)))
    d = decide(config, store, coordinator.current(), now, observed=load)
    assert d.hold is not None and d.factor == 8 and not d.applies and "held at 3" in d.reason


def test_the_scalability_coefficient_is_fitted_from_the_jobs_own_rescales():
    # each rescale 2 -> 4 -> 8 delivered half the predicted gain: busy throughput 100, 150, 225 records/s
    config, store, coordinator = _autosized()
    coordinator.initialize()
    for batch, (factor, rate) in enumerate(((2, 100), (4, 150), (8, 225)), start=1):
        if factor != 2:
            coordinator.rescale(factor, origin="autosize")
        per_task = rate // (2 * factor) or 1
        _batch(store, coordinator, batch, finished_ms=batch, per_task=per_task, busy_ms=1000, lag_left=500, total_ms=1000)
    rescales = past_rescales(store.generations("j"), store.metrics("j"))
    assert [(r.before_factor, r.after_factor) for r in rescales] == [(2, 4), (4, 8)]
    now = datetime.now(UTC)
    at = int(now.timestamp() * 1000)
    load = Observed(behind=0, exact=True, watermarks=(HighWatermarks(at - 10_000, 0), HighWatermarks(at, 1000)))
    record = decide(config, store, coordinator.current(), now, observed=load).record
    assert record is not None and record.rescales_fitted == 2 and 0.4 < record.scalability < 0.6


def test_the_cron_dag_path_reads_the_input_rate_from_the_batches():
    # two batches 10 s apart: 400 records kept by the second, lag 100 -> 300: 600 records arrived, 60/s
    metrics = [
        {"batch_id": 1, "finished_ms": 0, "kept": 100, "records_read": 100, "lag_left": 100},
        {"batch_id": 2, "finished_ms": 10_000, "kept": 400, "records_read": 400, "lag_left": 300},
    ]
    seen = observed_from_batches(metrics)
    assert seen.behind == 300 and input_rate(seen.watermarks) == 60.0
