"""The key bucket computed in Spark's JVM equals the one computed in Python."""

import random

import pytest

from elasticity.jobmodel.keybucket import key_bucket, key_hash

# record_hash as a Spark SQL expression: xxhash64(NULL) is the seed, not NULL, so the null key is explicit
BUCKET = "pmod(CASE WHEN key IS NULL THEN offset ELSE xxhash64(key) END, {factor})"


@pytest.fixture(scope="module")
def records():
    rng = random.Random(3)
    keys = [None, b"", b"user-0", "ключ".encode(), bytes(range(256))]
    keys += [rng.randbytes(rng.randrange(0, 40)) for _ in range(500)]
    keys += [None] * 20
    return [(k, rng.randrange(0, 2**40)) for k in keys]


@pytest.mark.parametrize("factor", [1, 2, 3, 8, 16, 256])
def test_spark_expression_matches_python(spark, records, factor):
    df = spark.createDataFrame(records, "key binary, offset long")
    rows = df.selectExpr("key", "offset", f"{BUCKET.format(factor=factor)} AS bucket").collect()
    assert len(rows) == len(records)
    for r in rows:
        assert r.bucket == key_bucket(None if r.key is None else bytes(r.key), r.offset, factor)


def test_spark_xxhash64_is_our_key_hash(spark, records):
    keyed = [(k, o) for k, o in records if k is not None]
    rows = spark.createDataFrame(keyed, "key binary, offset long").selectExpr("key", "xxhash64(key) AS h").collect()
    assert all(r.h == key_hash(bytes(r.key)) for r in rows)
