"""The bucket scan of a state move, in this process (tests/integration/test_bucketscan_workers.py: in its worker processes)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.jobmodel.keybucket import key_bucket
from elasticity.state.bucketscan import ScanJob, ScanResult, answer, scan
from tests.support.examples import examples
from tests.support.state_stores import read_sst, snapshot


@settings(max_examples=examples(15), deadline=None)
@given(keys=st.sets(st.binary(min_size=1, max_size=12), min_size=1, max_size=60), factor=st.integers(1, 12))
def test_each_entry_goes_to_the_file_of_its_bucket(tmp_path_factory, keys, factor):
    tmp = tmp_path_factory.mktemp("scan")
    entries = {k: k[::-1] + b"!" for k in keys}
    folder = snapshot(tmp / "db", entries)
    job = ScanJob(
        folder=folder, factor=factor, outputs={b: str(tmp / "out" / f"{b}.sst") for b in range(factor)}, store="s", source="t"
    )
    result = scan(job)
    for b in range(factor):
        want = {k: v for k, v in entries.items() if key_bucket(k, 0, factor) == b}
        assert (read_sst(tmp, job.outputs[b]) if want else {}) == want
        assert result.keys.get(b, 0) == len(want)
        assert result.bytes.get(b, 0) == sum(len(k) + len(v) for k, v in want.items())


def test_a_key_of_a_bucket_the_job_does_not_expect_is_an_error_naming_store_task_and_key(tmp_path):
    folder = snapshot(tmp_path / "db", {b"alice": b"1", b"bob": b"2"})
    wrong = 1 - key_bucket(b"alice", 0, 2)
    job = ScanJob(folder=folder, factor=2, outputs={wrong: str(tmp_path / "out.sst")}, store="totals", source="Partition 0_1")
    for result in (scan(job), ScanResult.from_json(answer(job.to_json()))):
        assert result.error is not None
        assert "store 'totals' of task 'Partition 0_1' holds key b'alice'" in result.error or "holds key b'bob'" in result.error


def test_a_worker_answers_a_failed_scan_with_its_error(tmp_path):
    """A worker never dies of a bad job: the move gets the error and fails naming it."""
    job = ScanJob(folder=str(tmp_path / "missing"), factor=2, outputs={0: None, 1: None}, store="s", source="t")
    result = ScanResult.from_json(answer(job.to_json()))
    assert result.error is not None and result.error.startswith("bucket scan failed: ")


def test_the_dry_run_counts_and_writes_no_file(tmp_path):
    folder = snapshot(tmp_path / "db", {f"k{i}".encode(): b"v" for i in range(50)})
    job = ScanJob(folder=folder, factor=3, outputs=dict.fromkeys(range(3)), store="s", source="t")
    result = scan(job)
    assert sum(result.keys.values()) == 50
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db"]


def test_json_round_trip():
    job = ScanJob(folder="/x", factor=4, outputs={0: "/a.sst", 2: None}, store="s", source="Partition 1_2")
    assert ScanJob.from_json(job.to_json()) == job
    result = ScanResult({0: 3}, {0: 40}, None)
    assert ScanResult.from_json(result.to_json()) == result
