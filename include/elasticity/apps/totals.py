"""Running totals per user: each order with its user's running total and order count (a store per virtual task),
to the Parquet output `parquet.totals` and to the Kafka topic `<input>-totals`. The formats' example job: with
an Avro topic, an Avro Kafka output and a typed Parquet output (docs/formats.md), or with JSON throughout."""

from __future__ import annotations

from typing import Any

from elasticity.api import KV, ApplicationDescriptor, Message, StoreDescriptor

TOTALS = StoreDescriptor("totals", key_serde="string", value_serde="json")  # user -> {"total", "count"}


def running(m: Message) -> KV:
    """The order, its user (the record's key) and the user's running total and count after it."""
    assert m.context is not None  # the app declares a store: its messages carry their task's context
    store = m.context.store("totals")
    seen: dict[str, Any] = store.get(m.key) or {"total": 0.0, "count": 0}
    now = {"total": round(seen["total"] + m.value["amount"], 2), "count": seen["count"] + 1}
    store.put(m.key, now)
    return KV(m.key, {**m.value, "user": m.key, **now})


def build(app: ApplicationDescriptor) -> None:
    app.store(TOTALS)
    for s in app.job_inputs:
        totals = app.input(s).filter(lambda m: m.key is not None).map(running)
        totals.send_to("parquet.totals")
        totals.send_to(f"{s.system}.{s.stream}-totals")
