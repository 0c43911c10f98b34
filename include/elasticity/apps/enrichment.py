"""Demo enrichment: each order is enriched by a slow per-record lookup (a
simulated remote call of DEMO_LOOKUP_MS, default 20 ms), the kind of job that
elasticity is for. Malformed orders (no `key` field) raise and go to the
dead-letter sink. `build_stateful` also keeps each user's running total and
order count in a store and emits them with the order."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable
from typing import Any

from elasticity.api import KV, ApplicationDescriptor, Message, StoreDescriptor

LOOKUP_MS = float(os.environ.get("DEMO_LOOKUP_MS", "20"))


def _tier(user: str) -> str:
    return "gold" if sum(user.encode()) % 5 == 0 else "standard"


def lookup_blocking(m: Message) -> list[KV]:
    if LOOKUP_MS:
        time.sleep(LOOKUP_MS / 1000)  # a remote call (none at 0 ms: the CPU benchmark's app)
    return [KV(m.key, {**m.value, "tier": _tier(m.value["key"] or "anonymous")})]


async def lookup(m: Message) -> list[KV]:
    if LOOKUP_MS:
        await asyncio.sleep(LOOKUP_MS / 1000)  # the same remote call, non-blocking
    return [KV(m.key, {**m.value, "tier": _tier(m.value["key"] or "anonymous")})]


def _valid(m: Message) -> bool:
    if not isinstance(m.value, dict) or "key" not in m.value:
        raise ValueError(f"order without a key field: {m.value!r}")
    return True


def build(app: ApplicationDescriptor) -> None:
    """Sync lookups: elasticity's virtual tasks give the parallelism."""
    for stream in app.job_inputs:
        app.input(stream).filter(_valid).flat_map(lookup_blocking).send_to("parquet.enriched")


def build_async(app: ApplicationDescriptor) -> None:
    """Async lookups: up to task.max.concurrency calls in flight per virtual task."""
    for stream in app.job_inputs:
        app.input(stream).filter(_valid).flat_map_async(lookup).send_to("parquet.enriched")


TOTALS = StoreDescriptor("totals", key_serde="string", value_serde="json")  # user -> {"total", "count"}


def _add(totals: dict[str, Any] | None, order: dict[str, Any]) -> dict[str, Any]:
    totals = totals or {"total": 0, "count": 0}
    return {"total": round(totals["total"] + order["amount"], 2), "count": totals["count"] + 1}


def running_totals(m: Message) -> KV:
    """The order with its user's running total and order count (orders without a user key have none)."""
    if m.key is None:
        return KV(m.key, {**m.value, "total": None, "count": None})
    assert m.context is not None  # the app declares a store: its messages carry their task's context
    store = m.context.store("totals")
    totals = _add(store.get(m.key), m.value)
    store.put(m.key, totals)
    return KV(m.key, {**m.value, **totals})


def totals_of(messages: Iterable[Message], start: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """What the store must hold after these orders, from `start` (what it held before them): the `state`
    data-quality check's reference, which folds only the batches since the last validated one."""
    out = dict(start or {})
    for m in messages:
        if m.key is not None:
            out[m.key] = _add(out.get(m.key), m.value)
    return out


def build_stateful(app: ApplicationDescriptor) -> None:
    """Running totals per user (a store per virtual task), then the async lookup."""
    app.store(TOTALS)
    app.state_reference("totals", totals_of)
    for stream in app.job_inputs:
        app.input(stream).filter(_valid).map(running_totals).flat_map_async(lookup).send_to("parquet.enriched")
