"""The product on a Spark standalone cluster of two workers on this machine (`elasticity cluster start`): each
worker its own host (work dir, ELASTICITY_HOME), the S3-protocol server as the storage they share, the Spark
Connect server attached to the master as the driver. A stateful job runs there through a rescale and an
executor SIGKILLed mid-batch, checked key by key; its slots stay on their executors; a default path that
executors would write under one host's ELASTICITY_HOME is refused; a master that is down fails a run at once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from elasticity.batch.coordinator import JobCoordinator
from elasticity.config import ConfigError, validate
from elasticity.spark.cluster import LocalCluster
from elasticity.spark.engine import MicroBatchEngine
from elasticity.spark.session import MasterUnreachable, session
from elasticity.state.backends.blob_manager import BlobNotFound, UploadFailed
from tests.integration.test_engine import feed
from tests.integration.test_stateful_engine import assert_state_and_outputs, job, state_check_passes  # noqa: F401 (job: a fixture)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    local = LocalCluster(tmp_path_factory.mktemp("cluster-home"))
    try:
        state = local.start(workers=2, cores=1, memory="1g")
        yield local, state
    finally:
        local.stop()


@pytest.fixture
def on_cluster(cluster, job, monkeypatch):  # noqa: F811 (the stateful job fixture, imported)
    """The stateful job of test_stateful_engine with every executor-written path on the shared S3 storage,
    its stores on each executor's own disk (no job.state.dir), run through the cluster's Connect server."""
    local, _ = cluster
    state = local.status()  # now: a fault test may have started the Connect server again, on another port
    assert state is not None
    topic, props, tmp_path = job
    for k, v in state.env().items():
        monkeypatch.setenv(k, v)  # the driver side reads the blob store and the sinks too
    props.pop("job.state.dir")
    props.update(state.job_settings(f"{props['job.name']}-{uuid.uuid4().hex[:6]}"))
    return local, state, topic, props


def executors(cluster_root: Path) -> list[int]:
    """Our cluster's executor JVMs (their working directory is under a worker's work dir)."""
    pids = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True).stdout.split()
    ours = []
    for pid in pids:
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(cluster_root):
                ours.append(int(pid))
        except OSError:
            continue
    return ours


def test_a_stateful_job_on_two_workers_through_a_rescale_and_an_executor_kill(on_cluster, kafka_bootstrap):
    local, state, topic, props = on_cluster
    config = validate(props)
    engine = MicroBatchEngine(config, session(config))
    feed(kafka_bootstrap, topic, 300, seed=31)
    first = engine.run(max_records=60, until_caught_up=True)
    assert len(first) >= 4 and first[-1].lag_left == 0
    homes = {f"{h}" for h in state.workers}
    used = [{e.split(":", 1)[1] for e in s.metrics["executors"]} for s in first]
    assert used[-1] == homes, used  # both workers ran slots: each its own host
    assert [s.metrics["state-restores"]["count"] for s in first[1:]] == [0] * (len(first) - 1)  # the slots stayed
    state_check_passes(config, engine.store, engine.inputs)

    JobCoordinator(config, engine.store, engine.inputs).rescale(4)
    feed(kafka_bootstrap, topic, 200, seed=32)
    engine.run(max_records=80, until_caught_up=True)
    assert_state_and_outputs(config, engine.store)

    feed(kafka_bootstrap, topic, 300, seed=33)
    victims = executors(local.root)
    assert len(victims) == 2

    def kill_one() -> None:
        time.sleep(1.0)  # mid-batch: lookups of 20 ms per record keep a batch running for seconds
        os.kill(victims[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_one)
    killer.start()
    try:
        after = engine.run(max_records=150, until_caught_up=True)
    except (BlobNotFound, UploadFailed):  # the executor took a snapshot's upload with it (UploadStalled): not committed
        after = []
    killer.join()
    after += engine.run(max_records=150, until_caught_up=True)  # the next run replays it, as the next scheduled run does
    assert after[-1].lag_left == 0
    assert sum(s.metrics.get("state-restores", {}).get("count", 0) for s in after) > 0  # a slot moved: its stores came from S3
    assert_state_and_outputs(config, engine.store)  # every order once, in order, every user's totals exact
    state_check_passes(config, engine.store, engine.inputs)


def test_a_default_path_under_one_hosts_home_is_refused_on_the_cluster(on_cluster, kafka_bootstrap):
    _, _, topic, props = on_cluster
    props.pop("job.audit.path")
    config = validate(props)
    feed(kafka_bootstrap, topic, 10, seed=34)
    with pytest.raises(ConfigError, match=r"job.audit.path is unset: on the cluster spark://127.0.0.1:\d+ executors write it"):
        MicroBatchEngine(config, session(config)).run()


def test_a_master_that_is_down_fails_a_run_at_once_naming_it(on_cluster, kafka_bootstrap):
    local, state, topic, props = on_cluster
    config = validate(props)
    engine = MicroBatchEngine(config, session(config))
    feed(kafka_bootstrap, topic, 50, seed=35)
    port = int(state.master.rsplit(":", 1)[1])
    assert local.master.stop()
    try:
        started = time.monotonic()
        with pytest.raises(MasterUnreachable, match=rf"Spark master spark://127.0.0.1:{port} unreachable"):
            engine.run()
        assert time.monotonic() - started < 10
    finally:
        local.start(workers=2, cores=1, memory="1g", master_port=port)  # the workers re-register with it
    assert engine.run(until_caught_up=True)[-1].lag_left == 0
    assert_state_and_outputs(config, engine.store)
