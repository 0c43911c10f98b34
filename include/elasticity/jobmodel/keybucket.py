"""Which key bucket of its partition a record belongs to.

Samza computes `abs(key.hashCode()) % F`; Java's hashCode of a byte[] is its
identity, so raw keys did not land in a stable bucket. We hash the key *bytes*
with XXH64 (seed 42), which is exactly Spark's `xxhash64` on a binary column, so
the driver, a Python worker and a vectorised Spark expression always agree. It
is also unrelated to Kafka's murmur2 partitioner: keys that share a partition
still spread evenly over the buckets.

bucket = pmod(signed_xxh64(key), F), or pmod(offset, F) for a null key (SEP-32).
Because the hash does not depend on F, a key in bucket b at factor F is in a
bucket b' with b' = b (mod F) at any multiple of F: the arithmetic that makes
checkpoint split and merge sound.
"""

from __future__ import annotations

import xxhash

SEED = 42
_2_63 = 1 << 63
_2_64 = 1 << 64


def key_hash(key: bytes) -> int:
    """Signed 64-bit XXH64 of the key bytes, the value `xxhash64(key)` gives in Spark."""
    h = xxhash.xxh64_intdigest(key, SEED)
    return h - _2_64 if h >= _2_63 else h


def record_hash(key: bytes | None, offset: int) -> int:
    """The integer a record is bucketed by: its key's hash, or its offset when the key is null."""
    return offset if key is None else key_hash(key)


def key_bucket(key: bytes | None, offset: int, factor: int) -> int:
    if factor < 1:
        raise ValueError(f"elasticity factor must be >= 1, got {factor}")
    return record_hash(key, offset) % factor  # Python's % is pmod for factor > 0
