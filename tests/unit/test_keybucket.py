from collections import Counter

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2
from scipy.stats import chisquare

from elasticity.jobmodel.keybucket import key_bucket, key_hash, record_hash


def test_hash_is_standard_xxh64():
    # the published XXH64 test vector (empty input, seed 0) pins the algorithm
    assert xxhash.xxh64_intdigest(b"", 0) == 0xEF46DB3751D8E999


@pytest.mark.parametrize(
    "key,expected",
    [
        # Golden values: a bucket must never change between releases, or
        # checkpoints would point at the wrong records. Spark agrees (integration test).
        (b"", -7444071767201028348),
        (b"user-0", -5538727405012674212),
        ("ключ".encode(), 7028797273662724703),
    ],
)
def test_key_hash_is_stable(key, expected):
    assert key_hash(key) == expected


@pytest.mark.parametrize(
    "key,factor,bucket",
    [
        # Golden buckets of keys whose hash is negative: pmod, never Samza's abs(h) % F (user-0 at 3: 2, at 256: 164)
        # nor a truncated remainder (-2 at 3): the driver, the workers and Spark's pmod must all say these.
        (b"user-0", 2, 0),
        (b"user-0", 3, 1),
        (b"user-0", 8, 4),
        (b"user-0", 256, 92),
        (b"user-7", 3, 1),
        (b"user-7", 256, 104),
        (b"", 3, 0),
        (b"", 256, 4),
        (b"user-1", 3, 0),
        (b"user-1", 256, 163),  # a positive hash, for contrast
    ],
)
def test_golden_buckets_of_keys_with_a_negative_hash(key, factor, bucket):
    assert key_bucket(key, 0, factor) == bucket
    assert key_bucket(key, 12345, factor) == bucket  # the offset plays no part for a key


@given(st.binary(max_size=64))
def test_key_hash_is_a_signed_64_bit_integer(key):
    assert -(2**63) <= key_hash(key) < 2**63


@given(st.binary(max_size=32) | st.none(), st.integers(0, 2**40), st.integers(1, 256))
def test_bucket_is_in_range(key, offset, factor):
    assert 0 <= key_bucket(key, offset, factor) < factor


@given(st.integers(0, 2**40), st.integers(1, 64))
def test_null_key_buckets_by_offset(offset, factor):
    assert key_bucket(None, offset, factor) == offset % factor
    assert record_hash(None, offset) == offset


@given(st.binary(max_size=32) | st.none(), st.integers(0, 2**40), st.integers(1, 32), st.integers(1, 8))
def test_split_keeps_each_key_inside_its_parent_bucket(key, offset, factor, k):
    """SEP-32's split rule: at factor k*F a key's bucket is congruent to its bucket at F."""
    assert key_bucket(key, offset, k * factor) % factor == key_bucket(key, offset, factor)


def test_bad_factor_is_rejected():
    with pytest.raises(ValueError, match=">= 1"):
        key_bucket(b"k", 0, 0)


def _murmur2_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions  # Kafka's default partitioner


@pytest.mark.parametrize("partitions,factor", [(8, 8), (8, 4), (4, 16), (6, 3), (12, 5)])
def test_keys_of_one_murmur2_partition_spread_evenly_over_buckets(partitions, factor):
    keys = [f"user-{i}".encode() for i in range(60_000)]
    same_partition = [k for k in keys if _murmur2_partition(k, partitions) == 1]
    counts = Counter(key_bucket(k, 0, factor) for k in same_partition)
    observed = [counts.get(b, 0) for b in range(factor)]
    assert chisquare(observed).pvalue > 1e-3, observed

    # The control shows the test can fail: buckets from the producer's own hash
    # are skewed inside a partition (all keys of partition 1 share murmur2 mod partitions).
    control = Counter((murmur2(k) & 0x7FFFFFFF) % factor for k in same_partition)
    control_observed = [control.get(b, 0) for b in range(factor)]
    if factor > 1 and (partitions % factor == 0 or factor % partitions == 0):
        assert chisquare(control_observed).pvalue < 1e-6
