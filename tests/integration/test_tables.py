"""Side-input tables on the embedded broker (no Spark): a slot's copy catches up to each batch's
recorded offsets, a replay of an earlier batch reads the table as it was then, and an unsealed
copy is rebuilt."""

from __future__ import annotations

import json
import uuid

from elasticity.api import TableDescriptor
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send
from elasticity.state.table import OFFSETS_FILE, SideInputBatch, SlotTables, TableBatch

USERS = TableDescriptor(name="users", side_inputs=())


def batch(bootstrap, topic, tmp_path, end):
    tb = TableBatch(
        name="users",
        targets=((SystemStreamPartition("kafka", topic, 0), end),),
        bootstraps=(("kafka", bootstrap),),
        serdes=(("kafka", "string", "json"),),
    )
    return SideInputBatch("tables", str(tmp_path), (tb,))


def snapshot(bootstrap, topic, tmp_path, end, slot=0):
    tables = SlotTables(batch(bootstrap, topic, tmp_path, end), {"users": USERS}, slot)
    try:
        t = tables.table("users")
        return {u: t.get(u) for u in ("u1", "u2", "u3")}, t.read_records
    finally:
        tables.close()


def test_a_table_reads_to_the_batch_offsets_and_replays_them(kafka_bootstrap, tmp_path):
    topic = f"users-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 1)
    send(kafka_bootstrap, topic, [(b"u1", json.dumps({"tier": "gold"}).encode()), (b"u2", json.dumps({"tier": "std"}).encode())])
    send(kafka_bootstrap, topic, [(b"u1", json.dumps({"tier": "silver"}).encode()), (b"u2", None), (b"u3", b"not json")])
    # batch 1 recorded offset 2, batch 2 offset 5
    assert snapshot(kafka_bootstrap, topic, tmp_path, 2) == ({"u1": {"tier": "gold"}, "u2": {"tier": "std"}, "u3": None}, 2)
    # the next batch reads on from 2 only; the tombstone deletes, the undecodable record is skipped
    assert snapshot(kafka_bootstrap, topic, tmp_path, 5) == ({"u1": {"tier": "silver"}, "u2": None, "u3": None}, 3)
    assert snapshot(kafka_bootstrap, topic, tmp_path, 5)[1] == 0  # caught up: nothing to read
    # a replay of batch 1 on this slot: the copy has read past its offsets, so it is rebuilt to exactly 2
    assert snapshot(kafka_bootstrap, topic, tmp_path, 2) == ({"u1": {"tier": "gold"}, "u2": {"tier": "std"}, "u3": None}, 2)
    # a copy left unsealed (a worker died while it caught up) is never trusted: rebuilt from the start
    folder = tmp_path / "side-inputs" / "users" / "slot-0"
    (folder / OFFSETS_FILE).unlink()
    assert snapshot(kafka_bootstrap, topic, tmp_path, 5) == ({"u1": {"tier": "silver"}, "u2": None, "u3": None}, 5)
    # another slot has its own copy
    assert snapshot(kafka_bootstrap, topic, tmp_path, 5, slot=7)[1] == 5
