"""The application API and the slice executor (pure Python, no Spark)."""

import asyncio

import pytest

from elasticity.api import KV, ApplicationDescriptor, Message
from elasticity.api.executor import SliceExecutor
from elasticity.api.stream import load_application
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition

S = SystemStream("kafka", "orders")
P = SystemStream("kafka", "payments")


def msgs(*values, stream=S):
    return [
        Message(key=f"k{i % 3}", value=v, ssp=SystemStreamPartition(stream.system, stream.stream, 0), offset=i, timestamp=0)
        for i, v in enumerate(values)
    ]


def test_map_filter_flat_map_keep_input_order_and_keys():
    app = ApplicationDescriptor((S,))
    app.input(S).map(lambda m: m.value * 10).filter(lambda v: v != 20).flat_map(lambda v: [v, v + 1]).send_to("parquet.out")
    result = SliceExecutor(app=app).run(msgs(1, 2, 3))
    out = result.outputs[app.output("parquet.out")]
    assert [(i, k, v) for i, k, v in out] == [(0, "k0", 10), (0, "k0", 11), (2, "k2", 30), (2, "k2", 31)]
    assert result.failures == {} and result.stopped_at is None


def test_flat_map_async_runs_concurrently_and_keeps_order():
    in_flight, peak = 0, 0

    async def slow(m):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05 if m.offset % 2 == 0 else 0.01)  # later records finish first
        in_flight -= 1
        return [KV(m.key, m.offset)]

    app = ApplicationDescriptor((S,))
    app.input(S).flat_map_async(slow).send_to("parquet.out")
    result = SliceExecutor(app=app, max_concurrency=32).run(msgs(*range(40)))
    assert [v for _, _, v in result.outputs[app.output("parquet.out")]] == list(range(40))
    assert peak == 32  # calls overlapped up to task.max.concurrency, not one after another


def test_max_concurrency_bounds_calls_in_flight():
    in_flight, peak = 0, 0

    async def probe(m):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.005)
        in_flight -= 1
        return [m.value]

    app = ApplicationDescriptor((S,))
    app.input(S).flat_map_async(probe).send_to("parquet.out")
    SliceExecutor(app=app, max_concurrency=3).run(msgs(*range(20)))
    assert peak == 3


def test_several_virtual_tasks_in_one_pass_each_keep_their_own_concurrency_and_order():
    """Segments are virtual tasks run in one pass: task.max.concurrency holds per task (one call at a time per
    task at 1, in offset order), the tasks' calls overlap, and under the fail policy each task stops on its own."""
    in_flight: dict[int, int] = {}
    peak: dict[int, int] = {}
    both = 0
    calls: list[int] = []

    async def probe(m):
        nonlocal both
        task = m.offset // 10
        in_flight[task] = in_flight.get(task, 0) + 1
        peak[task] = max(peak.get(task, 0), in_flight[task])
        both = max(both, sum(1 for n in in_flight.values() if n))
        calls.append(m.offset)
        await asyncio.sleep(0.002)
        in_flight[task] -= 1
        if m.value == "bad":
            raise ValueError("bad record")
        return [m.value]

    app = ApplicationDescriptor((S,))
    app.input(S).flat_map_async(probe).send_to("parquet.out")
    values = [f"a{i}" for i in range(10)] + [f"b{i}" if i != 3 else "bad" for i in range(10)]
    result = SliceExecutor(app=app, max_concurrency=1, policy="fail").run(msgs(*values), segments=[10, 20])
    assert peak == {0: 1, 1: 1} and both == 2
    assert [o for o in calls if o < 10] == list(range(10)) and [o for o in calls if o >= 10] == list(range(10, 20))
    assert result.stops == {1: 13} and result.stopped_at == 13
    assert [v for _, _, v in result.outputs[app.output("parquet.out")]] == values[:10] + ["b0", "b1", "b2"]


def test_callback_timeout_fails_the_record_into_the_dead_letters():
    async def maybe_slow(m):
        await asyncio.sleep(1 if m.value == "slow" else 0)
        return [m.value]

    app = ApplicationDescriptor((S,))
    app.input(S).flat_map_async(maybe_slow).send_to("parquet.out")
    result = SliceExecutor(app=app, max_concurrency=4, callback_timeout_ms=50).run(msgs("a", "slow", "c"))
    assert [v for _, _, v in result.outputs[app.output("parquet.out")]] == ["a", "c"]
    assert "timed out after task.callback.timeout.ms=50" in result.failures[1]


def _raises_on_bad(m):
    if m.value == "bad":
        raise ValueError("bad record")
    return m.value


def test_dlq_policy_drops_everything_derived_from_a_failing_record():
    app = ApplicationDescriptor((S,))
    stream = app.input(S)
    stream.send_to("parquet.raw")  # this branch alone would succeed
    stream.map(_raises_on_bad).send_to("parquet.clean")
    result = SliceExecutor(app=app, policy="dlq").run(msgs("a", "bad", "c"))
    assert [v for _, _, v in result.outputs[app.output("parquet.raw")]] == ["a", "c"]
    assert [v for _, _, v in result.outputs[app.output("parquet.clean")]] == ["a", "c"]
    assert result.failures == {1: "map-2: ValueError: bad record"} and result.stopped_at is None


def test_fail_policy_stops_the_task_at_the_first_failing_record():
    app = ApplicationDescriptor((S,))
    app.input(S).map(_raises_on_bad).send_to("parquet.out")
    result = SliceExecutor(app=app, policy="fail").run(msgs("a", "bad", "c", "bad"))
    assert [v for _, _, v in result.outputs[app.output("parquet.out")]] == ["a"]
    assert result.stopped_at == 1


def test_undecodable_records_never_reach_the_graph():
    seen = []
    app = ApplicationDescriptor((S,))
    app.input(S).map(lambda m: seen.append(m.offset) or m.value).send_to("parquet.out")
    result = SliceExecutor(app=app).run(msgs("a", None, "c"), failed={1: "deserialize: value is not valid json"})
    assert seen == [0, 2] and result.failures[1].startswith("deserialize")


def test_merge_and_partition_by():
    app = ApplicationDescriptor((S, P, SystemStream("kafka", "by-user")))
    merged = app.input(S).merge(app.input(P))
    rekeyed = merged.partition_by(lambda m: m.value["user"], "kafka.by-user")
    rekeyed.map(lambda m: m.value).send_to("parquet.users")
    orders = [Message(key="o1", value={"user": "u1"}, ssp=SystemStreamPartition("kafka", "orders", 0), offset=0, timestamp=0)]
    payments = [Message(key="p1", value={"user": "u2"}, ssp=SystemStreamPartition("kafka", "payments", 0), offset=5, timestamp=0)]
    result = SliceExecutor(app=app).run(orders + payments)
    intermediate = result.outputs[app.output("kafka.by-user")]
    assert [(k, v) for _, k, v in intermediate] == [("u1", {"user": "u1"}), ("u2", {"user": "u2"})]
    later = [Message(key="u1", value={"user": "u1"}, ssp=SystemStreamPartition("kafka", "by-user", 0), offset=0, timestamp=0)]
    assert [v for _, _, v in SliceExecutor(app=app).run(later).outputs[app.output("parquet.users")]] == [{"user": "u1"}]


def _interleaved(n):
    """Records of the slice alternate between orders (even offsets) and payments (odd)."""
    return [
        Message(
            key=f"k{i}",
            value=f"v{i}",
            ssp=SystemStreamPartition("kafka", "orders" if i % 2 == 0 else "payments", 0),
            offset=i,
            timestamp=0,
        )
        for i in range(n)
    ]


def test_an_operator_after_a_merge_sees_interleaved_inputs_in_input_order():
    seen = []
    app = ApplicationDescriptor((S, P))
    app.input(S).merge(app.input(P)).map(lambda m: seen.append(m.offset) or m.value).send_to("parquet.out")
    result = SliceExecutor(app=app).run(_interleaved(6))
    assert seen == [0, 1, 2, 3, 4, 5]  # one stream of the task's records, not orders first then payments
    assert [(i, v) for i, _, v in result.outputs[app.output("parquet.out")]] == [(i, f"v{i}") for i in range(6)]


def _fails_on_bad_text(text):
    if "bad" in text:
        raise ValueError("bad record")
    return text


def test_merged_inputs_keep_input_order_through_per_input_operators_and_failures():
    app = ApplicationDescriptor((S, P))
    orders = app.input(S).map(lambda m: f"order {m.value}")
    payments = app.input(P).flat_map(lambda m: [f"payment {m.value}", f"fee {m.value}"])
    orders.merge(payments).map(_fails_on_bad_text).send_to("parquet.out")
    records = _interleaved(6)
    records[3] = Message(
        key="k3", value="bad", ssp=records[3].ssp, offset=3, timestamp=0
    )  # a payment whose items reach the merge as "payment bad", "fee bad"
    result = SliceExecutor(app=app).run(records)
    out = [(i, v) for i, _, v in result.outputs[app.output("parquet.out")]]
    assert out == [
        (0, "order v0"),
        (1, "payment v1"),
        (1, "fee v1"),
        (2, "order v2"),
        (4, "order v4"),
        (5, "payment v5"),
        (5, "fee v5"),
    ]


def test_a_record_failing_in_one_branch_never_reaches_a_sibling_branch():
    sibling_saw = []
    app = ApplicationDescriptor((S,))
    stream = app.input(S)
    stream.filter(lambda m: True).map(_raises_on_bad).send_to("parquet.checked")  # fails deep in the first branch
    stream.map(lambda m: sibling_saw.append(m.offset) or m.value).send_to("parquet.copy")
    result = SliceExecutor(app=app, policy="dlq").run(msgs("a", "bad", "c"))
    assert sibling_saw == [0, 2]  # the sibling's code never ran on the failed record
    assert [v for _, _, v in result.outputs[app.output("parquet.copy")]] == ["a", "c"]
    assert result.failures == {1: "map-2: ValueError: bad record"}


def test_load_application():
    identity = load_application("elasticity.apps.identity:build", (S, P))
    assert set(identity.inputs) == {S, P} and set(identity.outputs) == {"parquet.output"}
    enrich = load_application("elasticity.apps.enrichment:build_async", (S,))
    assert [n.op for n in enrich.inputs[S].children] == ["filter"]
    with pytest.raises(ValueError, match="module:factory"):
        load_application("elasticity.apps.enrichment", (S,))
    with pytest.raises(ValueError, match="task.inputs does not list"):
        load_application("tests.unit.test_api:_reads_payments", (S,))


def _reads_payments(app):
    app.input(P).send_to("parquet.out")


def test_output_spec_is_validated():
    with pytest.raises(ValueError, match="kafka.<topic> or parquet.<name>"):
        ApplicationDescriptor().output("nowhere")


def test_an_app_module_that_is_not_on_the_path_is_named_with_the_fix():
    """Not `pip install elasticity[...]`: the user's own module is missing from the path (or not installed)."""
    with pytest.raises(ValueError, match=r"app.class='orders_app:build': no module 'orders_app' on this Python's path"):
        load_application("orders_app:build", [SystemStream("kafka", "orders")])
    with pytest.raises(ValueError, match="no module 'no_such_pkg'"):
        load_application("no_such_pkg.apps:build", [SystemStream("kafka", "orders")])


def test_the_stores_and_tables_the_engine_passes_have_the_api_protocols_methods():
    """`TaskContext.store` and `.table` are typed with the api's protocols; the engine's classes (from a layer
    above, which api cannot import) must have each of their methods with the same parameters."""
    import inspect

    from elasticity.api.context import KeyValueStore, Table
    from elasticity.state.kv import KeyValueStore as EngineStore
    from elasticity.state.table import SideInputTable

    for protocol, engine in ((KeyValueStore, EngineStore), (Table, SideInputTable)):
        methods = [n for n, f in vars(protocol).items() if inspect.isfunction(f) and not n.startswith("_")]
        assert methods
        for name in methods:
            theirs = list(inspect.signature(getattr(engine, name)).parameters)
            assert theirs == list(inspect.signature(getattr(protocol, name)).parameters), f"{engine.__name__}.{name}"
