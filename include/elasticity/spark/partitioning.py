"""Exact placement of virtual-task groups on Spark partitions.

`repartition(n, col)` puts a row in partition pmod(murmur3(col, seed 42), n):
with a few distinct values, two groups often collide in one partition and run
in one Python worker, one after the other. Each group therefore gets, as its
`slot` value, an integer whose hash lands in the partition of the group's own
number: n groups, n partitions, n Python workers side by side.
"""

from __future__ import annotations

_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's Murmur3_x86_32.hashInt, as a signed 32-bit int (SQL `hash(int_col)`)."""
    k1 = (value & _M) * 0xCC9E2D51 & _M
    k1 = _rotl(k1, 15) * 0x1B873593 & _M
    h1 = _rotl(seed ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _M
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def slot_values(n: int) -> list[int]:
    """values[p] is a non-negative int that `repartition(n, col)` sends to partition p."""
    values: dict[int, int] = {}
    v = 0
    while len(values) < n:
        values.setdefault(murmur3_int(v) % n, v)  # Python's % is pmod for a positive n
        v += 1
    return [values[p] for p in range(n)]
