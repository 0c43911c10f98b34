"""A worker cut off from the network for 30 s mid-batch, then reconnected (`make chaos`). The cluster's
workers run on hosts of their own (network namespaces joined by veth pairs to a bridge; see
tests/support/netns.py), and the master, the driver, the broker and the S3 server listen on the bridge's
address, so the cut is a real one: the worker's packets are dropped, as with a pulled cable. The run during
the cut may fail; the next run heals without a person, and every user's running totals are exact."""

from __future__ import annotations

import threading
import time

import pytest

from elasticity.config import validate
from elasticity.local.broker import EmbeddedBroker, free_port
from elasticity.local.cluster import LocalCluster
from elasticity.spark.engine import MicroBatchEngine
from elasticity.spark.session import session
from tests.chaos.test_cluster_faults import _report
from tests.integration.test_cluster import on_cluster  # noqa: F401 (a fixture)
from tests.integration.test_engine import feed
from tests.integration.test_stateful_engine import assert_state_and_outputs, job, state_check_passes  # noqa: F401
from tests.support.netns import Network

pytestmark = pytest.mark.chaos
CUT_S = 30


@pytest.fixture(scope="module")
def network():
    net = Network(hosts=2).up()
    try:
        yield net
    finally:
        net.down()


@pytest.fixture(scope="module")
def kafka_bootstrap(network, tmp_path_factory):
    """This module's broker, on the network's address: the workers' executors read from it."""
    broker = EmbeddedBroker(tmp_path_factory.mktemp("netcut-broker"), host=network.gateway)
    try:
        yield broker.start(port=free_port()).bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def cluster(network, tmp_path_factory):
    local = LocalCluster(
        tmp_path_factory.mktemp("netcut-cluster"), host=network.gateway, worker_hosts={0: network.host(0), 1: network.host(1)}
    )
    try:
        state = local.start(workers=2, cores=1, memory="1g")
        yield local, state
    finally:
        local.stop()


def test_a_worker_cut_off_from_the_network_for_30_s_mid_batch(on_cluster, network, kafka_bootstrap, capsys):  # noqa: F811
    local, state, topic, props = on_cluster
    assert state.master.startswith(f"spark://{network.gateway}:")
    config = validate(props)
    engine = MicroBatchEngine(config, session(config))
    feed(kafka_bootstrap, topic, 200, seed=51)
    first = engine.run(max_records=100, until_caught_up=True)
    assert {e.split(":", 1)[1] for e in first[-1].metrics["executors"]} == set(state.workers)  # both hosts ran slots
    feed(kafka_bootstrap, topic, 400, seed=52)
    marks: dict[str, float] = {}

    def cut() -> None:
        time.sleep(1.5)  # mid-batch: 20 ms lookups keep a batch running for seconds
        network.cut(1)
        marks["cut"] = time.monotonic()
        time.sleep(CUT_S)
        network.reconnect(1)
        marks["back"] = time.monotonic()

    t = threading.Thread(target=cut)
    t.start()
    error = None
    try:
        during = engine.run(max_records=150, until_caught_up=True)
    except Exception as e:  # noqa: BLE001 - the cut may fail the run; the next run must heal
        error, during = e, []
    t.join()
    after = engine.run(max_records=150, until_caught_up=True)  # the next scheduled run
    healed = time.monotonic()
    what = f"the run failed: {type(error).__name__}: {error}"[:300] if error else f"the run went on ({len(during)} batches)"
    _report(capsys, f"worker cut off from the network {CUT_S} s ({what})", healed - marks["cut"])
    restores = sum(s.metrics.get("state-restores", {}).get("count", 0) for s in during + after)
    with capsys.disabled():
        print(
            f"[chaos]   {healed - marks['back']:.1f} s after the link came back; {len(during) + len(after)} batches, "
            f"their slots on {sorted({e for s in during + after for e in s.metrics.get('executors', [])})}, {restores} store restores"
        )
    assert after[-1].lag_left == 0
    assert_state_and_outputs(config, engine.store)
    state_check_passes(config, engine.store, engine.inputs)
