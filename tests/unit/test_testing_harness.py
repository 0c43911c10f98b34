"""elasticity.testing: apps run on records in memory through the engine's process stage give what a
reference computed here gives, per key in input order at any factor, with the engine's dead letters."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticity.api import KV, ApplicationDescriptor, Message
from elasticity.apps import enrichment, sessions
from elasticity.config import ConfigError
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.testing import Record, TestRun
from tests.support.examples import examples

STATEFUL = "elasticity.apps.enrichment:build_stateful"


@pytest.fixture(autouse=True)
def no_lookup_delay(monkeypatch):
    monkeypatch.setattr(enrichment, "LOOKUP_MS", 0)  # DEMO_LOOKUP_MS=0: the demo's remote call takes no time


def order(user, amount):
    return (user, {"key": user, "amount": amount})


def messages(records):
    """The records as the app's messages, for enrichment.totals_of (only key and value matter to it)."""
    ssp = SystemStreamPartition("kafka", "orders", 0)
    return [Message(key=k, value=v, ssp=ssp, offset=i, timestamp=0) for i, (k, v) in enumerate(records)]


def per_key(kvs):
    out = defaultdict(list)
    for k, v in kvs:
        out[k].append(v)
    return dict(out)


# the example of docs/apps/testing.md
def test_running_totals_per_user():
    orders = [
        ("user-1", {"key": "user-1", "amount": 5}),
        ("user-2", {"key": "user-2", "amount": 3}),
        ("user-1", b"{not json"),
        ("user-1", {"key": "user-1", "amount": 2}),
    ]
    with TestRun("elasticity.apps.enrichment:build_stateful", inputs=["kafka.orders"], factor=4) as run:
        first = run.process(orders[:3], stream="kafka.orders", partitions=2)
        second = run.process(orders[3:])  # the next micro-batch: the store carries over

    assert [v["total"] for k, v in first.outputs["parquet.enriched"] if k == "user-1"] == [5]
    assert second.outputs["parquet.enriched"] == [
        ("user-1", {"key": "user-1", "amount": 2, "total": 7, "count": 2, "tier": "standard"})
    ]
    assert second.stores["totals"] == {"user-1": {"total": 7, "count": 2}, "user-2": {"total": 3, "count": 1}}
    assert first.dead_letters[0].error.startswith("deserialize: value is not valid json")


def test_the_stateful_demo_gives_totals_of_its_orders_and_each_order_with_its_running_total():
    orders = [order(f"user-{i % 5}", i + 0.5) for i in range(40)] + [(None, {"key": None, "amount": 1.0})]
    with TestRun(STATEFUL, inputs=["kafka.orders"], factor=4, partitions=3) as run:
        results = [run.process(orders[:25]), run.process(orders[25:])]
    assert [r.batch_id for r in results] == [1, 2]
    assert results[-1].stores["totals"] == enrichment.totals_of(messages(orders))
    running: dict = {}
    expected = []
    for k, v in orders:
        if k is not None:
            running[k] = enrichment._add(running.get(k), v)
        totals = running[k] if k is not None else {"total": None, "count": None}
        expected.append((k, {**v, **totals, "tier": enrichment._tier(v["key"] or "anonymous")}))
    got = [kv for r in results for kv in r.outputs["parquet.enriched"]]
    assert per_key(got) == per_key(expected)
    assert sum(t.processed for r in results for t in r.by_task.values()) == len(orders)


def test_the_identity_app_copies_every_record_in_order_per_partition():
    records = [Record(f"k{i % 7}", {"i": i}, timestamp=i) for i in range(30)] + [Record(None, {"i": 99}, partition=1)]
    with TestRun("elasticity.apps.identity:build", inputs=["kafka.orders"], factor=16, partitions=2) as run:
        result = run.process(records)
    emitted = result.emitted["parquet.output"]
    assert sorted(e.value["i"] for e in emitted) == [*range(30), 99]
    for task in {e.task for e in emitted}:
        offsets = [(e.partition, e.offset) for e in emitted if e.task == task]
        assert offsets == sorted(offsets)  # a virtual task's records in (partition, offset) order
    assert next(e for e in emitted if e.key is None).partition == 1


def test_a_malformed_record_and_one_the_app_refuses_are_dead_letters_with_the_engines_reasons():
    with TestRun(STATEFUL, inputs=["kafka.orders"]) as run:
        result = run.process([("user-1", b"\xff not json"), ("user-1", {"amount": 3}), order("user-1", 4)])
    reasons = {d.offset: d.error for d in result.dead_letters}
    assert reasons[0].startswith("deserialize: value is not valid json")
    assert reasons[1] == "filter-1: ValueError: order without a key field: {'amount': 3}"
    assert result.dead_letters[0].value == b"\xff not json"
    assert result.stores["totals"] == {"user-1": {"total": 4, "count": 1}}


def test_the_fail_policy_stops_the_task_and_its_next_batch_starts_at_the_record_again():
    config = {"task.dead.letter.policy": "fail"}
    with TestRun("tests.support.apps:broken", inputs=["kafka.orders"], config=config) as run:
        first = run.process([("k", {"n": i}) for i in range(5)])  # offset 2 fails
        second = run.process()
    assert [v for _, v in first.outputs["parquet.out"]] == [{"n": 0}, {"n": 1}]
    (task,) = first.by_task.values()
    assert "stopped at orders-0@2" in (task.error or "")
    assert first.dead_letters == [] and second.outputs["parquet.out"] == []  # it stops at the same record again


def test_a_bad_config_key_fails_as_in_a_job():
    with pytest.raises(ConfigError, match="task.max.concurrency"):
        TestRun(STATEFUL, inputs=["kafka.orders"], config={"task.max.concurrency": "0"})


def delayed(app: ApplicationDescriptor) -> None:
    """Each call sleeps less than the one before, so that with several in flight later calls end first."""

    async def slow(m: Message) -> list[KV]:
        await asyncio.sleep((50 - m.value["i"]) / 2000)
        return [KV(m.key, m.value["i"])]

    app.input("kafka.orders").flat_map_async(slow).send_to("parquet.out")


def test_async_calls_in_flight_keep_the_input_order():
    records = [("same-key", {"i": i}) for i in range(20)]
    with TestRun(delayed, inputs=["kafka.orders"], config={"task.max.concurrency": "8"}) as run:
        result = run.process(records)
    assert [v for _, v in result.outputs["parquet.out"]] == list(range(20))


def test_sessions_join_their_users_table_and_close_as_the_watermark_passes():
    clicks = [
        Record("u1", {"ts": 1_000, "amount": 1}),
        Record("u1", {"ts": 20_000, "amount": 2}),
        Record("u2", {"ts": 5_000, "amount": 4}),
    ]
    with TestRun(sessions.build, inputs=["kafka.clicks"], factor=4) as run:
        run.append("kafka.users", [("u1", {"tier": "gold"})])
        first = run.process(clicks, stream="kafka.clicks")
        later = [Record(u, {"ts": 200_000, "amount": 0}) for u in ("u1", "u2")]
        second = run.process(later, stream="kafka.clicks")
    assert first.outputs["parquet.sessions"] == []  # open until the watermark passes their end and the lateness
    assert sorted(
        (k, v["value"]["clicks"], v["value"]["amount"], v["value"]["tier"]) for k, v in second.outputs["parquet.sessions"]
    ) == [
        ("u1", 2, 3, "gold"),
        ("u2", 1, 4, None),
    ]
    per_minute = sorted((k, v["start"], v["value"]) for k, v in second.outputs["parquet.clicks-per-minute"])
    assert per_minute == [("u1", 0, 2), ("u2", 0, 1)]


keys = st.sampled_from([f"user-{i}" for i in range(6)])


@settings(
    max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    batches=st.lists(st.lists(st.tuples(keys, st.integers(1, 50)), max_size=12), min_size=1, max_size=3),
    partitions=st.integers(1, 3),
)
def test_per_key_order_and_the_final_state_do_not_depend_on_the_factor(batches, partitions):
    finals = []
    for factor in (1, 4, 16):
        with TestRun(STATEFUL, inputs=["kafka.orders"], factor=factor, partitions=partitions) as run:
            got = [kv for b in batches for kv in run.process([order(k, a) for k, a in b]).outputs["parquet.enriched"]]
            finals.append(run.stores())
        for k, values in per_key(got).items():
            assert [v["count"] for v in values] == list(range(1, len(values) + 1))  # each key's orders in input order
            assert [v["amount"] for v in values] == [a for b in batches for kk, a in b if kk == k]
    assert finals[0] == finals[1] == finals[2]
    assert finals[0]["totals"] == enrichment.totals_of(messages([order(k, a) for b in batches for k, a in b]))


def test_the_documented_example_is_a_test_here():
    import inspect
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "apps" / "testing.md").read_text()
    assert inspect.getsource(test_running_totals_per_user).strip() in page
