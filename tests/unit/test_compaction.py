"""Compaction and retention of the Parquet sinks, on real files: whatever batches were written, retried, compacted
and crashed, each sink reads exactly the rows last written per batch, and the ecosystem's readers agree."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from elasticity import faults
from elasticity.batch.sinks.compaction import SinkMaintenance, compact_root, compact_sinks
from elasticity.batch.sinks.outputs import (
    AUDIT_SCHEMA,
    DEAD_LETTER_SCHEMA,
    OUTPUT_SCHEMA,
    delete_batches,
    in_file,
    list_root,
    read_table,
    write_batch_file,
)
from elasticity.config import validate
from tests.support.sink_files import canonical, write, write_legacy

DAY_MS = 86_400_000
NOW_MS = 1_800_000_000_000
SINKS = {"out/doubled": OUTPUT_SCHEMA, "audit": AUDIT_SCHEMA, "dlq": DEAD_LETTER_SCHEMA}
POINTS = ("compaction.before_rename", "compaction.written", "compaction.deleted", "retention.deleted")


def config(folder: Path, target_bytes: int = 134217728, **retention: str) -> Any:
    props = {
        "job.name": "j",
        "task.inputs": "kafka.orders",
        "job.output.path": str(folder / "out"),
        "job.audit.path": str(folder / "audit"),
        "job.dead.letter.path": str(folder / "dlq"),
        "job.output.compaction.target.bytes": str(target_bytes),
        **{f"job.{k.replace('_', '.')}.retention.ms": v for k, v in retention.items()},
    }
    return validate(props)


def assert_reads(root: Path, schema: pa.Schema, expected: dict[int, list[dict[str, Any]]], subset: list[int]) -> None:
    """The dataset holds exactly the rows last written per batch, in batch order, all of them and by batch."""
    got = read_table(str(root), schema).to_pylist()
    assert canonical(got) == canonical([r for b in expected for r in expected[b]])
    assert [r["batch_id"] for r in got] == sorted(r["batch_id"] for r in got)
    some = read_table(str(root), schema, subset).to_pylist()
    assert canonical(some) == canonical([r for b in subset for r in expected.get(b, [])])


@contextmanager
def crash_at(name: str, nth: int) -> Iterator[None]:
    """Raise InjectedFault the nth time `name` is passed (a crash there: nothing after it runs)."""
    passed = 0

    def fn(point: str) -> None:
        nonlocal passed
        if point == name:
            passed += 1
            if passed == nth:
                raise faults.InjectedFault(point)

    with faults.hook(fn):
        yield


def compact_with_crash(folder: Path, cfg: Any, through: int, crash: tuple[str, int] | None) -> bool:
    """One maintenance run, crashed at `crash` if it gets there; True when it crashed."""
    if crash is None:
        compact_sinks(cfg, through_batch=through, now_ms=NOW_MS)
        return False
    with crash_at(*crash):
        try:
            compact_sinks(cfg, through_batch=through, now_ms=NOW_MS)
        except faults.InjectedFault:
            return True
    return False


slots = st.lists(st.integers(0, 4), min_size=1, max_size=3)
step = st.one_of(
    st.tuples(st.just("commit"), slots),  # the batch commits; the next one is written
    st.tuples(st.just("retry"), slots),  # the engine's retry: the batch's files deleted, written again
    st.tuples(st.just("rerun"), st.just([])),  # a Spark task retry: the same slots write their files again
    # a maintenance run up to some batches behind the last committed one, perhaps crashed the nth time at a point
    st.tuples(st.just("compact"), st.tuples(st.integers(0, 3), st.sampled_from(POINTS), st.integers(1, 3), st.booleans())),
)


@given(
    sink=st.sampled_from(sorted(SINKS)),
    legacy=st.integers(0, 3),
    target=st.integers(1, 12_000),
    steps=st.lists(step, min_size=1, max_size=25),
    subset=st.sets(st.integers(0, 16), max_size=6),
)
def test_any_history_of_writes_retries_compactions_and_crashes_reads_each_batch_once(sink, legacy, target, steps, subset):
    """One sink's history per example, the sink drawn: the sinks differ in their schema only (compaction and
    its crash points are per root), and an example's cost is its Parquet writes and reads, a third of them so.
    A crash in one sink's compaction after another's finished is the every-fault-point test's."""
    schema = SINKS[sink]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        root = folder / sink
        cfg = config(folder, target, output="-1", audit="-1", dead_letter="-1")  # no expiry: every row stays
        expected: dict[int, list[dict[str, Any]]] = {}
        for b in range(1, legacy + 1):
            expected[b] = write_legacy(root, schema, b, [2, 1])
        committed, batch, attempt, current = legacy, legacy + 1, 0, [1, 1]
        expected[batch] = write(root, schema, batch, slots=current, attempt=attempt)
        for kind, arg in steps:
            if kind == "commit":
                committed, batch, attempt, current = batch, batch + 1, 0, arg
            elif kind == "retry":
                attempt, current = attempt + 1, arg
                delete_batches(str(root), [batch])
            elif kind == "rerun":
                attempt += 1
            if kind != "compact":
                expected[batch] = write(root, schema, batch, slots=current, attempt=attempt)
            else:
                behind, point, nth, crash = arg
                through = max(committed - behind, 0)  # the caller's validated batch: committed, never written again
                crashed = compact_with_crash(folder, cfg, through, (point, nth) if crash else None)
                if crashed:  # readers meanwhile, then the retry finishes the job
                    event(f"crashed at {point}")
                    assert_reads(root, schema, expected, sorted(subset))
                    compact_with_crash(folder, cfg, through, None)
                listing = list_root(str(root))
                assert not listing.covered
                assert all(f.kind == "compacted" for f in listing.live if f.last <= through)
            assert_reads(root, schema, expected, sorted(subset))


def scenario(folder: Path) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """Legacy batches 1-2, batches 3-9 on two slots (3-5 compacted already, 20 days old), 9 not yet validated;
    batches 6-9 10 days old."""
    expected: dict[str, dict[int, list[dict[str, Any]]]] = {s: {} for s in SINKS}
    for sink, schema in SINKS.items():
        root = folder / sink
        for b in (1, 2):
            expected[sink][b] = write_legacy(root, schema, b, [2, 1])
        for b in range(3, 10):
            expected[sink][b] = write(root, schema, b, slots=[3, 2])
        for f in root.rglob("*.parquet"):
            os.utime(f, ns=((NOW_MS - 20 * DAY_MS) * 10**6,) * 2)
    compact_sinks(config(folder, 1500), through_batch=5, now_ms=NOW_MS - 20 * DAY_MS)
    for sink in SINKS:
        for f in (folder / sink).glob("batch-*.parquet"):
            os.utime(f, ns=((NOW_MS - 10 * DAY_MS) * 10**6,) * 2)
    return expected


def test_a_crash_at_every_fault_point_and_a_retry_end_as_a_run_without_one(tmp_path):
    """Every point a maintenance run passes, crashed at each of its passings: readers meanwhile see every row
    once (expired rows aside), and the retry leaves the files a run without a crash leaves."""
    clean = tmp_path / "clean"
    expected = scenario(clean)
    cfg = config(clean, 3000, audit=str(14 * DAY_MS))  # audit: batches 1-5 expire; 6-8 kept, 9 not validated
    passed: list[str] = []
    pristine = tmp_path / "pristine"
    shutil.copytree(clean, pristine)
    with faults.hook(passed.append):
        report = compact_sinks(cfg, through_batch=8, now_ms=NOW_MS)
    assert set(passed) == set(POINTS)
    assert report.sinks[1].files_expired > 0 and report.sinks[0].files_expired == 0
    done = {s: sorted(p.relative_to(clean / s).as_posix() for p in (clean / s).rglob("*")) for s in SINKS}
    kept = {s: {b: r for b, r in expected[s].items() if s != "audit" or b > 5} for s in SINKS}
    for sink, schema in SINKS.items():
        assert_reads(clean / sink, schema, kept[sink], [1, 5, 6, 9])
    for point in POINTS:
        for nth in range(1, passed.count(point) + 1):
            run = tmp_path / f"{point}-{nth}"
            shutil.copytree(pristine, run)
            cfg = config(run, 3000, audit=str(14 * DAY_MS))
            assert compact_with_crash(run, cfg, 8, (point, nth))
            for sink, schema in SINKS.items():
                got = canonical(read_table(str(run / sink), schema).to_pylist())
                assert len(got) == len(set(got))  # never a row twice
                assert set(canonical([r for rs in kept[sink].values() for r in rs])) <= set(got)  # none lost
            compact_with_crash(run, cfg, 8, None)
            for sink, schema in SINKS.items():
                assert sorted(p.relative_to(run / sink).as_posix() for p in (run / sink).rglob("*")) == done[sink]
                assert_reads(run / sink, schema, kept[sink], [1, 5, 6, 9])


def test_retention_expires_validated_audit_rows_and_dead_letters_never_outputs(tmp_path):
    expected = scenario(tmp_path)
    report = compact_sinks(config(tmp_path, 3000), through_batch=8, now_ms=NOW_MS + 20 * DAY_MS)
    assert isinstance(report, SinkMaintenance) and [s.sink for s in report.sinks] == ["parquet.doubled", "audit", "dead-letter"]
    assert read_table(str(tmp_path / "out/doubled"), OUTPUT_SCHEMA).num_rows == sum(map(len, expected["out/doubled"].values()))
    audit = read_table(str(tmp_path / "audit"), AUDIT_SCHEMA).to_pylist()
    assert {r["batch_id"] for r in audit} == {9}  # older than 7 days and validated: gone; 9 is not validated
    dead = read_table(str(tmp_path / "dlq"), DEAD_LETTER_SCHEMA).to_pylist()
    assert {r["batch_id"] for r in dead} == set(range(6, 10))  # 30 days: 1-5 (40 days old) gone, 6-8 (30) kept
    compact_sinks(config(tmp_path, 3000), through_batch=8, now_ms=NOW_MS + 21 * DAY_MS)
    assert {r["batch_id"] for r in read_table(str(tmp_path / "dlq"), DEAD_LETTER_SCHEMA).to_pylist()} == {9}


def test_a_compacted_file_keeps_its_batches_times_and_spans_a_tenth_of_the_retention(tmp_path):
    """Compaction writes a new file, whose mtime is not its rows' age: the footer carries their times, and with a
    retention files are not merged across more than a tenth of it (else a small file would never expire)."""
    root = tmp_path / "dlq"
    for b in range(1, 21):
        write(root, DEAD_LETTER_SCHEMA, b, slots=[1])
        os.utime(root / f"batch-{b:012d}-slot-0.parquet", ns=((NOW_MS - (40 - b) * DAY_MS) * 10**6,) * 2)
    kw = {"sink": "dead-letter", "target_bytes": 1 << 30, "retention_ms": 30 * DAY_MS}
    compact_root(str(root), DEAD_LETTER_SCHEMA, through_batch=20, now_ms=NOW_MS - 19 * DAY_MS, **kw)
    ranges = [(f.first, f.last) for f in list_root(str(root)).live]
    assert ranges == [(1, 4), (5, 8), (9, 12), (13, 16), (17, 20)]  # each within 3 days of batch times
    report = compact_root(str(root), DEAD_LETTER_SCHEMA, through_batch=20, now_ms=NOW_MS - DAY_MS, **kw)
    assert report.files_expired == 2 and report.files_written == 0  # 1-4 and 5-8: their newest batch over 30 days old
    assert {r["batch_id"] for r in read_table(str(root), DEAD_LETTER_SCHEMA).to_pylist()} == set(range(9, 21))


def test_files_are_bin_packed_to_the_target_and_large_ones_left_alone(tmp_path):
    """Batch files of incompressible values (a file's own overhead small beside its rows, as at 128 MiB)."""
    root = tmp_path / "out"
    for b in range(1, 41):
        for slot in (0, 1):
            part = [{"key": b"k", "value": os.urandom(1000), "task_name": "t", "seq": i} for i in range(20)]
            write_batch_file(str(root), b, f"slot-{slot}", pa.Table.from_pylist(part, schema=in_file(OUTPUT_SCHEMA)))
    one = sum(f.size for f in list_root(str(root)).live if f.first == 1)
    kw = {"sink": "parquet.out", "now_ms": NOW_MS, "retention_ms": None, "target_bytes": 10 * one + one // 2}
    report = compact_root(str(root), OUTPUT_SCHEMA, through_batch=40, **kw)
    assert (report.files_before, report.batches_compacted, report.files_expired) == (80, 40, 0)
    live = list_root(str(root)).live
    assert report.files_after == len(live) == report.files_written == 4
    assert all(kw["target_bytes"] // 2 <= f.size <= kw["target_bytes"] for f in live)  # about the target
    again = compact_root(str(root), OUTPUT_SCHEMA, through_batch=40, **kw)
    assert again.files_written == 0 and list_root(str(root)).live == live  # half the target or more: done
    assert read_table(str(root), OUTPUT_SCHEMA).num_rows == 1600


def test_only_batches_up_to_the_given_one_are_touched(tmp_path):
    root = tmp_path / "audit"
    for b in range(1, 6):
        write(root, AUDIT_SCHEMA, b, slots=[1, 1])
    compact_root(str(root), AUDIT_SCHEMA, sink="audit", through_batch=3, now_ms=NOW_MS, target_bytes=1 << 20, retention_ms=0)
    assert sorted(p.name for p in root.iterdir()) == [f"batch-{b:012d}-slot-{s}.parquet" for b in (4, 5) for s in (0, 1)]
    compact_root(str(root), AUDIT_SCHEMA, sink="audit", through_batch=4, now_ms=NOW_MS, target_bytes=1 << 20, retention_ms=None)
    assert sorted(p.name for p in root.iterdir())[0] == "batch-000000000005-slot-0.parquet"
    assert [f.name for f in root.glob("compacted-*")] == ["compacted-000000000004-000000000004.parquet"]


def test_a_compacted_batch_is_never_deleted_as_a_retry_s(tmp_path):
    root = tmp_path / "audit"
    write(root, AUDIT_SCHEMA, 1, slots=[1])
    compact_root(str(root), AUDIT_SCHEMA, sink="audit", through_batch=1, now_ms=NOW_MS, target_bytes=1 << 20, retention_ms=None)
    with pytest.raises(ValueError, match="compacted already"):
        delete_batches(str(root), [1])


def test_overlapping_compacted_files_fail_the_read_rather_than_guess(tmp_path):
    root = tmp_path / "audit"
    for b in (1, 2, 3):
        write(root, AUDIT_SCHEMA, b, slots=[1])
    compact_root(str(root), AUDIT_SCHEMA, sink="audit", through_batch=2, now_ms=NOW_MS, target_bytes=1 << 20, retention_ms=None)
    pq.write_table(read_table(str(root), AUDIT_SCHEMA, [2, 3]), root / "compacted-000000000002-000000000003.parquet")
    with pytest.raises(ValueError, match="overlap"):
        read_table(str(root), AUDIT_SCHEMA)


def test_after_compaction_pyarrow_and_pandas_read_the_root_as_one_dataset(tmp_path):
    import pandas as pd
    import pyarrow.dataset as ds

    for sink, schema in SINKS.items():
        for b in (1, 2):
            write_legacy(tmp_path / sink, schema, b, [2, 1])
        for b in range(3, 8):
            write(tmp_path / sink, schema, b, slots=[3, 2])
    compact_sinks(config(tmp_path, 2500, audit="-1", dead_letter="-1"), through_batch=5, now_ms=NOW_MS)
    for sink, schema in SINKS.items():
        root = tmp_path / sink
        ours = canonical(read_table(str(root), schema).to_pylist())
        assert len(ours) == 2 * 3 + 5 * 5
        for theirs in (
            pq.read_table(root).to_pylist(),
            ds.dataset(root, format="parquet").to_table().to_pylist(),
            pd.read_parquet(root).to_dict("records"),
        ):
            assert canonical([{k: (None if v != v else v) for k, v in r.items()} for r in theirs]) == ours
