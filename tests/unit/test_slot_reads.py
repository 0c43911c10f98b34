"""What each process slot reads and keeps: its own virtual tasks' records, each exactly once over all slots."""

from hypothesis import given
from hypothesis import strategies as st

from elasticity.batch.container.reader import ROUTED_SCHEMA, Chunk, Columns, ReadCounts, Routed, RouteTable, SlotReads, route
from elasticity.checkpoint.task_checkpoint import Watermark
from elasticity.jobmodel.keybucket import record_hash

FACTOR = 4


def _chunk(start: int, end: int, partition: int = 0) -> Chunk:
    return Chunk(bootstrap="127.0.0.1:9092", system="kafka", stream="orders", partition=partition, start=start, end=end)


def _columns(records: list[tuple[bytes | None, int]]) -> Columns:
    return {
        "offset": [o for _, o in records],
        "key": [k for k, _ in records],
        "value": [b"v"] * len(records),
        "timestamp": [0] * len(records),
    }


def test_a_slot_reads_only_the_ssps_its_tasks_own_from_their_lowest_offset():
    route = RouteTable(
        2,
        {
            ("kafka", "orders", 0): {0: ("t0", 10, (), 0), 1: ("t1", 30, (), 1)},
            ("kafka", "orders", 1): {0: ("u0", 5, (), 1), 1: ("u1", 7, (), 1)},
        },
    )
    reads = SlotReads.of(route, [_chunk(0, 20), _chunk(20, 40), _chunk(0, 20, partition=1)])
    assert reads.chunks[0] == (_chunk(10, 20), _chunk(20, 40))
    assert reads.chunks[1] == (_chunk(30, 40), _chunk(5, 20, partition=1))  # [0, 20) of partition 0 is below t1's offset


owners_st = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1)), min_size=FACTOR, max_size=FACTOR)
records_st = st.lists(st.one_of(st.none(), st.binary(min_size=1, max_size=3)), max_size=60)


@given(owners_st, records_st, st.integers(0, FACTOR - 1), st.integers(0, 60))
def test_each_record_is_kept_by_exactly_the_slot_of_its_task_unless_already_processed(owners, keys, marked, mark_at):
    records = [(k, o) for o, k in enumerate(keys)]
    watermark = Watermark(FACTOR * 2, marked, mark_at)  # a rescale's watermark on one finer bucket
    table = RouteTable(
        FACTOR,
        {("kafka", "orders", 0): {b: (f"t{b}", first, (watermark,), slot) for b, (first, slot) in enumerate(owners)}},
    )
    kept: dict[int, list[tuple[int, str]]] = {}
    counts = {}
    for slot in (0, 1):
        counts[slot], routed = ReadCounts(), Routed()
        half = len(records) // 2  # two reads of the partition into one slot's records
        for part in (records[:half], records[half:]):
            route(table, _chunk(0, len(records)), _columns(part), slot=slot, counts=counts[slot], out=routed)
        out = routed.table()
        assert out.schema == ROUTED_SCHEMA
        assert set(out.column("partition").to_pylist()) <= {0}
        assert all(keys[o] == k for o, k in zip(out.column("offset").to_pylist(), out.column("key").to_pylist(), strict=True))
        kept[slot] = list(zip(out.column("offset").to_pylist(), out.column("task_name").to_pylist(), strict=True))
        assert out.column("offset").to_pylist() == sorted(out.column("offset").to_pylist())  # read order kept
    for key, offset in records:
        h = record_hash(key, offset)
        bucket = h % FACTOR
        first, slot = owners[bucket]
        done = offset < first or watermark.covers(h, offset)
        assert ((offset, f"t{bucket}") in kept[slot]) is not done
        assert all(offset not in [o for o, _ in kept[s]] for s in (0, 1) if s != slot)
    assert sum(sum(c.read.values()) for c in counts.values()) == len(records)
    assert sum(sum(c.skipped.values()) for c in counts.values()) == len(records) - sum(len(k) for k in kept.values())
