"""Demo enrichment: each order is enriched by a slow per-record lookup (a
simulated remote call of DEMO_LOOKUP_MS, default 20 ms), the kind of job that
elasticity is for. Malformed orders (no `key` field) raise and go to the
dead-letter sink."""

from __future__ import annotations

import asyncio
import os
import time

from ..api import KV, ApplicationDescriptor, Message

LOOKUP_MS = float(os.environ.get("DEMO_LOOKUP_MS", "20"))


def _tier(user: str) -> str:
    return "gold" if sum(user.encode()) % 5 == 0 else "standard"


def lookup_blocking(m: Message) -> list[KV]:
    time.sleep(LOOKUP_MS / 1000)  # a remote call
    return [KV(m.key, {**m.value, "tier": _tier(m.value["key"] or "anonymous")})]


async def lookup(m: Message) -> list[KV]:
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

