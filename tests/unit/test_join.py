"""Stream-table joins in the slice executor, against a real side-input table (RocksDB) fed
with records directly (the Kafka reading is in tests/integration/test_tables.py)."""

from __future__ import annotations

import pytest

from elasticity.api import KV, ApplicationDescriptor, Message, TableDescriptor, TaskContext
from elasticity.api.executor import SliceExecutor
from elasticity.config import ConfigError, validate
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName
from elasticity.state.table import SideInputTable, TableBatch, resolve_tables

S = SystemStream("kafka", "clicks")
USERS = SystemStreamPartition("kafka", "users", 0)


def table(tmp_path, descriptor, records):
    t = SideInputTable(
        tmp_path / "t", descriptor, TableBatch(name=descriptor.name, targets=(), bootstraps=(), serdes=()), descriptor.processor
    )
    t.apply([(i, k, v, 0) for i, (k, v) in enumerate(records)], USERS, "string", "json")
    return t


def run(app, tables, *clicks):
    ctx = TaskContext(TaskName("Partition 0"), None, tables.__getitem__)
    msgs = [
        Message(key=k, value=v, ssp=SystemStreamPartition("kafka", "clicks", 0), offset=i, timestamp=0, context=ctx)
        for i, (k, v) in enumerate(clicks)
    ]
    result = SliceExecutor(app=app).run(msgs)
    return [(k, v) for _, k, v in result.outputs.get(app.output("parquet.out"), [])], result.failures


@pytest.fixture
def users(tmp_path):
    t = table(
        tmp_path,
        TableDescriptor(name="users", side_inputs=("kafka.users",)),
        [
            (b"u1", b'{"tier": "gold"}'),
            (b"u2", b'{"tier": "standard"}'),
            (b"u3", b'{"tier": "x"}'),
            (b"u3", None),  # a tombstone
            (b"u2", b'{"tier": "silver"}'),  # the latest value wins
        ],
    )
    yield t
    t.close()


def joined(kind, **kw):
    app = ApplicationDescriptor((S,))
    users = app.table(TableDescriptor(name="users", side_inputs=("kafka.users",)))
    app.input(S).join(users, lambda m, u: KV(m.key, {**m.value, "tier": u and u["tier"]}), kind=kind, **kw).send_to("parquet.out")
    return app


def test_inner_join_drops_a_miss_and_left_join_keeps_it(users):
    clicks = [("u1", {"n": 1}), ("u3", {"n": 2}), ("u2", {"n": 3}), (None, {"n": 4})]
    assert run(joined("inner"), {"users": users}, *clicks)[0] == [
        ("u1", {"n": 1, "tier": "gold"}),
        ("u2", {"n": 3, "tier": "silver"}),
    ]
    assert run(joined("left"), {"users": users}, *clicks)[0] == [
        ("u1", {"n": 1, "tier": "gold"}),
        ("u3", {"n": 2, "tier": None}),
        ("u2", {"n": 3, "tier": "silver"}),
        (None, {"n": 4, "tier": None}),
    ]


def test_key_function_and_failures_charged_to_the_record(users):
    app = joined("inner", key_fn=lambda m: m.value["user"])
    out, failures = run(app, {"users": users}, ("k", {"user": "u2"}), ("k", {}), ("k", {"user": "u1"}))
    assert [v["tier"] for _, v in out] == ["silver", "gold"] and "KeyError" in failures[1]


def test_a_side_inputs_processor_shapes_the_entries(tmp_path):
    d = TableDescriptor(
        name="tiers", side_inputs=("kafka.users",), processor=lambda m: [(m.value["tier"], m.key)] if m.value else []
    )
    t = table(tmp_path, d, [(b"u1", b'{"tier": "gold"}'), (b"u2", b'{"tier": "silver"}')])
    try:
        assert t.get("gold") == "u1" and t.get("silver") == "u2" and t.get("u1") is None
    finally:
        t.close()


def test_declaration_errors():
    app = ApplicationDescriptor((S,))
    with pytest.raises(ValueError, match="no table 'users'"):
        app.input(S).join("users", lambda m, u: m)
    app.table(TableDescriptor(name="users", side_inputs=("kafka.users",)))
    with pytest.raises(ValueError, match="join kind 'outer' is not one of"):
        app.input(S).join("users", lambda m, u: m, kind="outer")
    with pytest.raises(ValueError, match="a table has that name"):
        app.store("users")
    with pytest.raises(ValueError, match="declared twice"):
        app.table(TableDescriptor(name="users", side_inputs=("kafka.other",)))


def test_side_inputs_config():
    base = {"job.name": "j", "task.inputs": "kafka.clicks"}
    tables = {"users": TableDescriptor(name="users", side_inputs=("kafka.users",))}
    (t,) = resolve_tables(validate(base), tables)
    assert t.streams == (SystemStream("kafka", "users"),) and t.processor_factory is None
    (t,) = resolve_tables(
        validate(
            {
                **base,
                "stores.users.side.inputs": "kafka.people,kafka.more",
                "stores.users.side.inputs.processor.factory": "my.mod:factory",
            }
        ),
        tables,
    )
    assert (
        t.streams == (SystemStream("kafka", "people"), SystemStream("kafka", "more")) and t.processor_factory == "my.mod:factory"
    )
    with pytest.raises(ConfigError, match="stores.users.side.inputs is required"):
        resolve_tables(validate(base), {"users": TableDescriptor(name="users")})
    with pytest.raises(ConfigError, match="stores.other.side.inputs: the app declares no table 'other'"):
        resolve_tables(validate({**base, "stores.other.side.inputs": "kafka.x"}), tables)
    with pytest.raises(ConfigError, match="also in task.inputs"):
        resolve_tables(validate({**base, "stores.users.side.inputs": "kafka.clicks"}), tables)
    with pytest.raises(ConfigError, match="stores.users.side.inputs.processor.factory='nofactory': expected module:factory"):
        validate({**base, "stores.users.side.inputs.processor.factory": "nofactory"})
