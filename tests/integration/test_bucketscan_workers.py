"""The bucket scan in its worker processes (ScanWorkers: this file's module run as a script per core)
gives what the scan in this process gives; a dead worker fails the scan instead of hanging it."""

from __future__ import annotations

import os
import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.jobmodel.keybucket import key_bucket
from elasticity.state.bucketscan import ScanJob, ScanWorkers, scan
from tests.support.state_stores import read_sst, snapshot


@pytest.fixture(scope="module")
def workers():
    w = ScanWorkers(2)
    yield w
    w.close()


@settings(max_examples=15, deadline=None)
@given(keys=st.sets(st.binary(min_size=1, max_size=12), min_size=1, max_size=60), factor=st.integers(1, 12))
def test_each_entry_goes_to_the_file_of_its_bucket_in_a_worker_as_in_process(tmp_path_factory, workers, keys, factor):
    tmp = tmp_path_factory.mktemp("scan")
    entries = {k: k[::-1] + b"!" for k in keys}
    folder = snapshot(tmp / "db", entries)
    results = []
    for where in ("inproc", "worker"):
        job = ScanJob(
            folder=folder, factor=factor, outputs={b: str(tmp / where / f"{b}.sst") for b in range(factor)}, store="s", source="t"
        )
        results.append(scan(job) if where == "inproc" else workers.run(job))
        for b in range(factor):
            want = {k: v for k, v in entries.items() if key_bucket(k, 0, factor) == b}
            assert (read_sst(tmp, job.outputs[b]) if want else {}) == want
            assert results[-1].keys.get(b, 0) == len(want)
            assert results[-1].bytes.get(b, 0) == sum(len(k) + len(v) for k, v in want.items())
    assert results[0] == results[1]


def test_a_key_of_a_bucket_the_job_does_not_expect_is_an_error_naming_store_task_and_key(tmp_path, workers):
    folder = snapshot(tmp_path / "db", {b"alice": b"1", b"bob": b"2"})
    wrong = 1 - key_bucket(b"alice", 0, 2)
    result = workers.run(
        ScanJob(folder=folder, factor=2, outputs={wrong: str(tmp_path / "out.sst")}, store="totals", source="Partition 0_1")
    )
    assert result.error is not None
    assert "store 'totals' of task 'Partition 0_1' holds key b'alice'" in result.error or "holds key b'bob'" in result.error


def test_the_dry_run_counts_and_writes_no_file(tmp_path, workers):
    folder = snapshot(tmp_path / "db", {f"k{i}".encode(): b"v" for i in range(50)})
    job = ScanJob(folder=folder, factor=3, outputs=dict.fromkeys(range(3)), store="s", source="t")
    result = workers.run(job)
    assert sum(result.keys.values()) == 50 and result == scan(job)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db"]


def test_a_worker_that_died_fails_the_scan_naming_it_and_does_not_hang(tmp_path):
    folder = snapshot(tmp_path / "db", {b"a": b"1"})
    w = ScanWorkers(1)
    try:
        (proc,) = w._procs
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for _ in range(2):  # the dead worker goes back to the idle queue: the next job fails too, it does not wait forever
            with pytest.raises(RuntimeError, match=rf"bucket scan worker {proc.pid} exited with -9"):
                w.run(ScanJob(folder=folder, factor=1, outputs={0: str(tmp_path / "o.sst")}, store="s", source="t"))
    finally:
        w.close()
