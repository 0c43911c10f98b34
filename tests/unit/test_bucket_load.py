"""The busiest key bucket at the weighed factors, as the reads count it: what a factor's busiest virtual task
would hold of the very records read, each factor's buckets being pmod(hash, F) of a partition (SEP-32)."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from elasticity.batch.container.bucket_load import BucketLoad, busiest_of
from elasticity.batch.container.reader import Chunk, ReadCounts, Routed, RouteTable, SlotReads, route
from elasticity.jobmodel.keybucket import record_hash

WEIGHED = (1, 2, 3, 4, 6, 7, 8)


def _brute_force(records: list[tuple[int, int]]) -> dict[int, int]:
    """Per factor, the most records in one (partition, hash mod F)."""
    return {f: max(Counter((p, h % f) for p, h in records).values(), default=0) for f in WEIGHED}


signed_hashes = st.integers(-(2**63), 2**63 - 1)  # as key_hash gives them


@given(st.lists(st.tuples(st.integers(0, 3), signed_hashes), max_size=300), st.integers(1, 5))
def test_the_busiest_bucket_per_factor_is_the_most_records_of_one_partitions_bucket(records, reads):
    load = BucketLoad(WEIGHED)
    for i in range(reads):  # a partition read in several chunks adds up
        for p in range(4):
            load.add(p, [h for q, h in records[i::reads] if q == p])
    assert load.busiest() == _brute_force(records)


def test_the_batch_takes_the_most_any_slot_counted():
    # a partition read by two slots counts in both: the max does not change
    assert busiest_of([{1: 50, 4: 20}, {1: 50, 4: 22}, {}]) == {1: 50, 4: 22}


@given(st.lists(st.tuples(st.integers(0, 1), st.one_of(st.none(), st.binary(min_size=1, max_size=3))), max_size=80))
def test_the_routing_counts_the_weighed_factors_of_every_record_it_reads(keyed):
    # two partitions at factor 2, each bucket owned by slot 0, one record already processed by its task
    owners = {b: (f"t{p}-{b}", 1, (), 0) for p in (0, 1) for b in (0, 1)}
    table = RouteTable(2, {("kafka", "orders", p): dict(owners) for p in (0, 1)}, WEIGHED)
    counts = ReadCounts(load=BucketLoad(WEIGHED))
    records: list[tuple[int, int]] = []
    for p in (0, 1):
        part = [k for q, k in keyed if q == p]
        cols = {"offset": list(range(len(part))), "key": part, "value": [b"v"] * len(part), "timestamp": [0] * len(part)}
        chunk = Chunk(bootstrap="127.0.0.1:9092", system="kafka", stream="orders", partition=p, start=0, end=len(part))
        route(table, chunk, cols, slot=0, counts=counts, out=Routed())
        records += [(p, record_hash(k, o)) for o, k in enumerate(part)]
    assert counts.load is not None and counts.load.busiest() == _brute_force(records)


def test_a_slot_counts_only_when_the_table_weighs_factors():
    empty = SlotReads(RouteTable(1, {}), {})
    assert empty.read(0, source=lambda chunks: iter(()))[1].load is None
    weighed = SlotReads(RouteTable(1, {}, (1, 2)), {})
    assert weighed.read(0, source=lambda chunks: iter(()))[1].load == BucketLoad((1, 2))
