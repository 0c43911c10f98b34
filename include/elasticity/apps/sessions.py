"""Example app with windows and a stream-table join: clicks per user, each joined with the
user's profile from the table `users` (a compacted topic read as a side input, left join),
then counted per minute of event time and grouped into sessions (30 s of inactivity end
one) whose value is a general reduce: clicks, amount and the tier the user had last.

Event time is the click's `ts` field (ms) when it has one, else its Kafka timestamp.
Configured in include/jobs/examples/sessions.properties.
"""

from __future__ import annotations

from typing import Any

from elasticity.api import KV, ApplicationDescriptor, Message, TableDescriptor, Windows

USERS = TableDescriptor(name="users", side_inputs=("kafka.users",), key_serde="string", value_serde="json")
MINUTE_MS = 60_000
SESSION_GAP_MS = 30_000
ALLOWED_LATENESS_MS = 10_000


def with_profile(m: Message, profile: dict[str, Any] | None) -> KV:
    if not isinstance(m.value, dict):
        raise ValueError(f"click is not a JSON object: {m.value!r}")
    return KV(m.key, {**m.value, "tier": (profile or {}).get("tier")})


def event_time(kv: KV) -> int | None:
    return kv.value.get("ts")


def _session_add(kv: KV, s: dict[str, Any]) -> dict[str, Any]:
    return {"clicks": s["clicks"] + 1, "amount": round(s["amount"] + kv.value.get("amount", 0), 2), "tier": kv.value["tier"]}


def _session_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two sessions a late click joins; `b` started later, its tier is the more recent."""
    return {"clicks": a["clicks"] + b["clicks"], "amount": round(a["amount"] + b["amount"], 2), "tier": b["tier"]}


SESSION = Windows.reduce(lambda: {"clicks": 0, "amount": 0, "tier": None}, _session_add, _session_merge)


def build(app: ApplicationDescriptor) -> None:
    users = app.table(USERS)
    first, *rest = [app.input(s) for s in app.job_inputs]
    clicks = first.merge(*rest).filter(lambda m: m.key is not None).join(users, with_profile, kind="left")
    per_minute = Windows.keyed_tumbling_window(
        lambda kv: kv.key, MINUTE_MS, *Windows.count(), event_time=event_time, allowed_lateness_ms=ALLOWED_LATENESS_MS
    )
    sessions = Windows.keyed_session_window(
        lambda kv: kv.key, SESSION_GAP_MS, *SESSION, event_time=event_time, allowed_lateness_ms=ALLOWED_LATENESS_MS
    )
    clicks.window(per_minute, "clicks-per-minute").send_to("parquet.clicks-per-minute")
    clicks.window(sessions, "sessions").send_to("parquet.sessions")
