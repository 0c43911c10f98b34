"""Faults on the two-worker cluster (`make chaos`; not part of `make test`): a worker killed mid-batch and
started again, the Spark Connect server (the driver) killed mid-batch and started again, the master down and
back. After each, the next run heals without a person, and nothing is lost, duplicated or reordered: every
user's running totals are exact. Each test prints how long healing took."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from elasticity.config import validate
from elasticity.spark.engine import MicroBatchEngine
from elasticity.spark.session import MasterUnreachable, session
from tests.integration.test_cluster import cluster, on_cluster  # noqa: F401 (fixtures)
from tests.integration.test_engine import feed
from tests.integration.test_stateful_engine import assert_state_and_outputs, job, run_cli, state_check_passes  # noqa: F401

pytestmark = pytest.mark.chaos


def _report(capsys, fault: str, heal_s: float) -> None:
    with capsys.disabled():
        print(f"\n[chaos] {fault}: healed in {heal_s:.1f} s (fault to the next committed batch)")


def _run_with_fault(engine: MicroBatchEngine, fault, delay_s: float = 1.5) -> tuple[BaseException | None, float]:
    """engine.run until caught up, with `fault` striking `delay_s` into it; returns what the run raised and when
    the fault struck."""
    struck: list[float] = []

    def strike() -> None:
        time.sleep(delay_s)
        struck.append(time.monotonic())
        fault()

    t = threading.Thread(target=strike)
    t.start()
    error = None
    try:
        engine.run(max_records=150, until_caught_up=True)
    except Exception as e:  # noqa: BLE001 - the fault may fail the run; the next run must heal
        error = e
    t.join()
    return error, struck[0]


def test_a_worker_killed_mid_batch_and_started_again(on_cluster, kafka_bootstrap, capsys):  # noqa: F811
    local, _, topic, props = on_cluster
    config = validate(props)
    engine = MicroBatchEngine(config, session(config))
    feed(kafka_bootstrap, topic, 200, seed=41)
    engine.run(max_records=100, until_caught_up=True)
    feed(kafka_bootstrap, topic, 400, seed=42)
    error, struck = _run_with_fault(engine, lambda: local.stop_worker(1))
    local.start_worker(1)
    summaries = engine.run(until_caught_up=True)
    _report(
        capsys,
        f"worker killed mid-batch ({f'the run failed: {error}'[:300] if error else 'the run went on'})",
        time.monotonic() - struck,
    )
    assert summaries[-1].lag_left == 0
    assert_state_and_outputs(config, engine.store)
    state_check_passes(config, engine.store, engine.inputs)


def test_the_connect_server_killed_mid_batch_and_started_again(on_cluster, kafka_bootstrap, tmp_path, capsys):  # noqa: F811
    local, state, topic, props = on_cluster
    config = validate(props)
    engine = MicroBatchEngine(config, session(config))
    feed(kafka_bootstrap, topic, 200, seed=43)
    engine.run(max_records=100, until_caught_up=True)
    feed(kafka_bootstrap, topic, 400, seed=44)
    server = local.connect.status()
    assert server is not None
    error, struck = _run_with_fault(engine, lambda: os.killpg(server.pid, signal.SIGKILL))
    assert error is not None  # the driver died under the run
    restarted = local.start(workers=2)  # the server again, on its address
    assert restarted.connect == state.connect
    # the next run is a new process, as Airflow's next task is: it replays the batch cut off, then the rest
    run = run_cli({**props, "spark.remote": restarted.connect or ""}, tmp_path, "--until-caught-up")
    assert run.returncode == 0, run.stderr[-3000:]
    _report(capsys, "Spark Connect server SIGKILLed mid-batch", time.monotonic() - struck)
    assert "(replayed)" in run.stdout + run.stderr or engine.store.pending_plan(config.job_name) is None
    assert_state_and_outputs(config, engine.store)
    state_check_passes(config, engine.store, engine.inputs)


def test_the_master_down_and_back(on_cluster, kafka_bootstrap, capsys):  # noqa: F811
    local, state, topic, props = on_cluster
    config = validate(props)
    engine = MicroBatchEngine(config, session(config))
    feed(kafka_bootstrap, topic, 100, seed=45)
    port = int(state.master.rsplit(":", 1)[1])
    local.master.stop()
    struck = time.monotonic()
    with pytest.raises(MasterUnreachable):
        engine.run()
    failed_after = time.monotonic() - struck
    local.start(workers=2, master_port=port)
    assert engine.run(until_caught_up=True)[-1].lag_left == 0
    _report(
        capsys, f"master down (the run failed in {failed_after:.1f} s, one line) and started again", time.monotonic() - struck
    )
    assert_state_and_outputs(config, engine.store)
