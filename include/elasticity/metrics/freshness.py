"""How fresh a batch's outputs are: how old its oldest and newest records were when its commit was durable.

A record's age is the commit time minus its Kafka timestamp (the producer's CreateTime, or the broker's
LogAppendTime, as the topic sets it). Each process slot takes the minimum and maximum timestamp of the records
it processes (an aggregate over its Arrow column, nothing per record leaves the worker); the driver takes the
minimum and maximum of its slots', and the commit callback subtracts them from its commit time. Samza has no
end-to-end latency metric; the names follow its style (`messages-behind-high-watermark`):
`batch-freshness-oldest-ms`, `batch-freshness-newest-ms`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

HOUR_MS = 3_600_000  # the window of the job page's percentiles
OLDEST_GAUGE = "batch-freshness-oldest-ms"
NEWEST_GAUGE = "batch-freshness-newest-ms"


def timestamp_span(timestamps: pa.ChunkedArray | pa.Array) -> tuple[int | None, int | None]:
    """The lowest and highest Kafka timestamp (ms) of a slot's records; (None, None) when none has one (a
    record without a timestamp reads as -1)."""
    known = pc.filter(timestamps, pc.greater_equal(timestamps, 0))
    if len(known) == 0:
        return None, None
    span = pc.min_max(known)
    return span["min"].as_py(), span["max"].as_py()


def batch_span(slots: Iterable[tuple[int | None, int | None]]) -> tuple[int | None, int | None]:
    """The batch's lowest and highest record timestamp from its slots' (None: a slot without records)."""
    lows, highs = [], []
    for low, high in slots:
        if low is not None and high is not None:
            lows.append(low)
            highs.append(high)
    return (min(lows), max(highs)) if lows else (None, None)


def freshness(oldest_ts: int | None, newest_ts: int | None, committed_ms: int) -> dict[str, int] | None:
    """How old the batch's oldest and newest records were at its commit; None for a batch of no timestamped record."""
    if oldest_ts is None or newest_ts is None:
        return None
    return {"oldest": committed_ms - oldest_ts, "newest": committed_ms - newest_ts}


def percentile(values: Sequence[int], p: float) -> int:
    """The nearest-rank percentile: the smallest value at least p% of the values are at or below."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass(frozen=True, kw_only=True)
class FreshnessWindow:
    """Freshness over the batches committed in a window (the job page's: the last hour), in ms."""

    batches: int
    oldest_p50: int
    oldest_p99: int
    newest_p50: int
    newest_p99: int


def window(rows: Sequence[tuple[int, int]]) -> FreshnessWindow | None:
    """p50 and p99 over the (oldest, newest) freshness of each batch in the window; None when it has none."""
    if not rows:
        return None
    oldest, newest = [r[0] for r in rows], [r[1] for r in rows]
    return FreshnessWindow(
        batches=len(rows),
        oldest_p50=percentile(oldest, 50),
        oldest_p99=percentile(oldest, 99),
        newest_p50=percentile(newest, 50),
        newest_p99=percentile(newest, 99),
    )
