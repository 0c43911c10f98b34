"""A store's live folder between two processes of one host (`state.handover`), as two Spark Python workers
share an executor's state folder: one parks a store after its snapshot, the other asks for it and opens it
as it is; a store that a process is still writing (a cancelled batch's worker) is never rebuilt under it."""

from __future__ import annotations

import multiprocessing as mp
import re
import time

import pytest

from elasticity.jobmodel.model import TaskName
from elasticity.state import handover
from elasticity.state.handover import StoreBusy, parking
from tests.unit.test_state_store import commit, container

TASK = TaskName("Partition 0")


def holder(tmp_path, park: bool, conn) -> None:
    """Another process of the host: restores the store, writes, commits; then parks it (or keeps writing it,
    in use), and reports what it sees when told to."""
    csm = container(tmp_path)
    csm.restore({})
    kv = csm.store(TASK, "counts")
    kv.put_all({"a": 1, "b": 2})
    cps = commit(csm)
    ts = csm.tasks[TASK]["counts"]
    if park:
        parking().park(ts)
    else:
        kv.put("c", 3)  # in use: written since its snapshot
    conn.send(cps)
    conn.recv()  # the other process is done
    conn.send({"open": ts.kv is not None, "entries": dict(ts.kv.all()) if ts.kv is not None else None})
    csm.close()


@pytest.fixture
def other_process(tmp_path):
    procs = []

    def start(park: bool):
        parent, child = mp.get_context("spawn").Pipe()
        p = mp.get_context("spawn").Process(target=holder, args=(tmp_path, park, child))
        p.start()
        procs.append(p)
        assert parent.poll(60), "the holder process did not start"
        return p, parent, parent.recv()

    yield start
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()


def test_a_store_parked_in_another_process_is_handed_over_sealed_and_opened_as_it_is(tmp_path, other_process):
    proc, conn, cps = other_process(park=True)
    csm = container(tmp_path)
    assert csm.restore(cps) == {TASK: {"counts": "local"}}  # the live folder as the holder sealed it: no download
    assert dict(csm.store(TASK, "counts").all()) == {"a": 1, "b": 2}
    conn.send("done")
    assert conn.recv() == {"open": False, "entries": None}  # the holder's keeper closed it when asked
    csm.close()


def test_a_store_another_process_is_writing_is_never_rebuilt_under_it(tmp_path, other_process, monkeypatch):
    proc, conn, cps = other_process(park=False)
    monkeypatch.setattr(handover, "CLAIM_TIMEOUT_S", 1.0)
    csm = container(tmp_path)
    started = time.monotonic()
    folder = csm.tasks[TASK]["counts"].root
    with pytest.raises(StoreBusy, match=rf"{re.escape(str(folder))} is held by process {proc.pid} on this host"):
        csm.restore(cps)
    assert time.monotonic() - started >= 1.0
    conn.send("done")
    assert conn.recv() == {"open": True, "entries": {"a": 1, "b": 2, "c": 3}}  # untouched by the failed restore
    csm.close()
