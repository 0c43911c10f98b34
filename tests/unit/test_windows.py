"""Keyed event-time windows: assignment, closing by the watermark, lateness, and the
property that any split of a task's records into batches emits the same windows
as one batch (each batch restored from the previous one's committed snapshot).
Real RocksDB stores through the ContainerStorageManager, no Spark."""

from __future__ import annotations

import shutil
import tempfile
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticity.api import KV, ApplicationDescriptor, Message, TaskContext, WindowPane, Windows
from elasticity.api.executor import SliceExecutor
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV2
from elasticity.config import validate
from elasticity.jobmodel.keybucket import key_hash
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskModel, TaskName
from elasticity.state import ContainerStorageManager, StorageConfig, WrongBucketError
from elasticity.state.kv import bucket_of
from tests.support.examples import examples

S = SystemStream("kafka", "clicks")
TASK = TaskName("Partition 0")


def tumbling_app(duration=10, lateness=0, aggregation=None, key_fn=lambda m: m.key):
    app = ApplicationDescriptor((S,))
    w = Windows.keyed_tumbling_window(key_fn, duration, *(aggregation or Windows.count()), allowed_lateness_ms=lateness)
    app.input(S).window(w, "per-ten").send_to("parquet.windows")
    return app


def session_app(gap=5, lateness=0, aggregation=None):
    app = ApplicationDescriptor((S,))
    w = Windows.keyed_session_window(lambda m: m.key, gap, *(aggregation or Windows.count()), allowed_lateness_ms=lateness)
    app.input(S).window(w, "sessions").send_to("parquet.windows")
    return app


class Job:
    """One virtual task's stores, committed after every batch and restored before the next, as the engine does."""

    def __init__(self, app, root: Path, task: TaskName = TASK) -> None:
        self.app, self.task, self.offset, self.cp = app, task, 0, None
        config = validate(
            {
                "job.name": "w",
                "task.inputs": str(S),
                "task.checkpoint.read.versions": "2,1",
                "job.state.dir": str(root / "state"),
                "blob.store.uri": str(root / "blobs"),
                "stores.backup.factories": "blobstore",
            }
        )
        stores = list(app.stores.values())
        self.csm = ContainerStorageManager(StorageConfig.of(config, stores), stores, [TaskModel(task, frozenset(), 0)], 1)

    def batch(self, records, commit=True):
        """records: (key, event time, value); returns (outputs, failures)."""
        self.csm.restore({self.task: self.cp})
        ctx = TaskContext(self.task, partial(self.csm.store, self.task))
        msgs = []
        for key, t, v in records:
            msgs.append(
                Message(
                    key=key,
                    value=v,
                    ssp=SystemStreamPartition(S.system, S.stream, 0),
                    offset=self.offset,
                    timestamp=t,
                    context=ctx,
                )
            )
            self.offset += 1
        result = SliceExecutor(app=self.app).run(msgs)
        if commit:
            cp_id = CheckpointId.create()
            markers = self.csm.upload(self.csm.snapshot(cp_id))
            self.cp = CheckpointV2(cp_id, {}, markers[self.task])
            self.csm.cleanup({self.task: self.cp})
        else:
            self.offset -= len(records)
        self.csm.release()
        out = [v for _, _, v in result.outputs.get(self.app.output("parquet.windows"), [])]
        return out, {msgs[i].offset: e for i, e in result.failures.items()} | {
            msgs[i].offset: "; ".join(r) for i, r in result.late.items()
        }

    def entries(self, store):
        """The committed entries of a store, raw (what a rescale reads from the snapshots)."""
        self.csm.restore({self.task: self.cp})
        try:
            return list(self.csm.store(self.task, store).db.items())
        finally:
            self.csm.release()

    def load(self, store, entries):
        """Start from these raw entries (what a rescale writes for a new task), committed."""
        self.csm.restore({self.task: self.cp})
        db = self.csm.store(self.task, store).db
        for k, v in entries:
            db.put(k, v)
        cp_id = CheckpointId.create()
        self.cp = CheckpointV2(cp_id, {}, self.csm.upload(self.csm.snapshot(cp_id))[self.task])
        self.csm.release()

    def close(self):
        self.csm.close()


@pytest.fixture
def job(tmp_path):
    jobs = []

    def make(app, task=TASK):
        jobs.append(Job(app, tmp_path / f"j{len(jobs)}", task))
        return jobs[-1]

    yield make
    for j in jobs:
        j.close()


def pane(key, start, end, value):
    return {"key": key, "start": start, "end": end, "value": value}


def test_tumbling_count_closes_when_the_watermark_passes_the_end(job):
    j = job(tumbling_app())
    assert j.batch([("a", 1, None), ("b", 3, None), ("a", 9, None)]) == ([], {})  # watermark 9: [0, 10) open
    out, late = j.batch([("a", 10, None), ("b", 4, None)])  # b@4 arrives after the watermark reached 10: late
    assert out == [pane("a", 0, 10, 2), pane("b", 0, 10, 1)] and list(late) == [4]
    assert "window 'per-ten'" in late[4] and "[0, 10)" in late[4] and "watermark 10" in late[4] and "'b'" in late[4]
    out, late = j.batch([("a", 25, None)])
    assert out == [pane("a", 10, 20, 1)] and late == {}


def test_allowed_lateness_keeps_a_window_open_longer(job):
    j = job(tumbling_app(lateness=5))
    j.batch([("a", 1, None), ("a", 12, None)])
    out, late = j.batch([("a", 3, None), ("a", 14, None)])  # watermark 14 < 10 + 5: [0, 10) still takes a@3
    assert out == [] and late == {}
    out, late = j.batch([("a", 15, None), ("a", 4, None)])  # 15 closes [0, 10); a@4 is late
    assert out == [pane("a", 0, 10, 2)] and list(late) == [5] and "allowed lateness 5 ms" in late[5]


def test_sum_and_reduce(job):
    j = job(tumbling_app(aggregation=Windows.sum(lambda m: m.value["amount"])))
    j.batch([("a", 1, {"amount": 2}), ("a", 2, {"amount": 3})])
    assert j.batch([("a", 30, {"amount": 1})])[0] == [pane("a", 0, 10, 5)]
    r = job(tumbling_app(aggregation=Windows.reduce(lambda: [], lambda m, acc: [*acc, m.value])))
    r.batch([("a", 1, "x"), ("a", 2, "y")])
    assert r.batch([("a", 30, "z")])[0] == [pane("a", 0, 10, ["x", "y"])]


def test_sessions_extend_merge_and_close(job):
    j = job(session_app(gap=5, lateness=10))
    assert j.batch([("a", 0, None), ("a", 3, None), ("a", 11, None)]) == ([], {})  # [0, 8) and [11, 16)
    out, late = j.batch([("a", 7, None), ("b", 16, None)])  # less than 5 from both: they merge into [0, 16)
    assert out == [] and late == {}
    out, late = j.batch([("b", 21, None)])  # exactly the gap after b@16: a new session
    assert out == [] and late == {}
    out, late = j.batch([("a", 40, None), ("b", 38, None)])  # 40 >= 16 + 10 closes a's session and b's two
    assert out == [pane("a", 0, 16, 4), pane("b", 16, 21, 1), pane("b", 21, 26, 1)] and late == {}
    out, late = j.batch([("a", 20, None)])  # [20, 25) would close at 35 <= watermark 40: late
    assert out == [] and "session window [20, 25)" in late[8]


def test_session_windows_need_a_merger():
    with pytest.raises(ValueError, match="merger"):
        Windows.keyed_session_window(lambda m: m.key, 5, lambda: 0, lambda m, n: n + 1)


def test_event_time_function_and_bad_event_times(job):
    app = ApplicationDescriptor((S,))
    w = Windows.keyed_tumbling_window(lambda kv: kv.key, 10, *Windows.count(), event_time=lambda kv: kv.value["ts"])
    app.input(S).map(lambda m: KV(m.key, m.value)).window(w, "by-ts").map(lambda p: p).send_to("parquet.windows")
    j = job(app)
    out, failures = j.batch([("a", 999, {"ts": 1}), ("a", 999, {"ts": "soon"}), ("a", 999, {"ts": 21})])
    assert out == [pane("a", 0, 10, 1)] and "event time must be an int" in failures[1]


def test_closed_windows_go_downstream_in_end_start_key_order(job):
    app = ApplicationDescriptor((S,))
    w = Windows.keyed_tumbling_window(lambda m: m.key, 10, *Windows.count())
    app.input(S).window(w, "w").map(lambda p: (p.key, p.start)).send_to("parquet.windows")
    j = job(app)
    assert j.batch([("c", 5, None), ("b", 5, None), ("a", 5, None), ("b", 15, None)])[0] == [("a", 0), ("b", 0), ("c", 0)]
    assert j.batch([("y", 50, None), ("z", 100, None)])[0] == [("b", 10), ("y", 50)]


def test_window_keys_follow_the_input_key(job):
    """At factor 2 a window keyed by anything but the input key would put state in another task's bucket."""
    task = TaskName("Partition_0-0-2")
    mine = next(k for k in (f"u{i}" for i in range(100)) if key_hash(k.encode()) % 2 == 0)
    other = next(k for k in (f"u{i}" for i in range(100)) if key_hash(k.encode()) % 2 == 1)
    j = job(tumbling_app(key_fn=lambda m: other if m.value == "wrong" else m.key), task=task)
    out, failures = j.batch([(mine, 1, "ok"), (mine, 2, "wrong"), (mine, 30, "ok")])
    assert out == [pane(mine, 0, 10, 1)] and list(failures) == [1] and WrongBucketError.__name__ in failures[1]


def test_a_batch_that_is_not_committed_leaves_no_trace(job):
    j = job(tumbling_app())
    j.batch([("a", 1, None)])
    assert j.batch([("a", 2, None), ("a", 50, None)], commit=False)[0] == [pane("a", 0, 10, 2)]
    assert j.batch([("a", 2, None), ("a", 50, None)])[0] == [pane("a", 0, 10, 2)]  # the replay: same outputs


def test_window_ids_are_unique_and_name_their_store():
    app = ApplicationDescriptor((S,))
    w = Windows.keyed_tumbling_window(lambda m: m.key, 10, *Windows.count())
    app.input(S).window(w, "w1")
    assert app.stores["w1"].input_key is not None
    with pytest.raises(ValueError, match="'w1' is used twice"):
        app.input(S).window(w, "w1")
    with pytest.raises(ValueError, match="positive int"):
        Windows.keyed_tumbling_window(lambda m: m.key, 0, *Windows.count())
    with pytest.raises(ValueError, match="allowed_lateness_ms"):
        Windows.keyed_tumbling_window(lambda m: m.key, 10, *Windows.count(), allowed_lateness_ms=-1)


def test_a_record_late_for_one_window_still_counts_in_another(job):
    app = ApplicationDescriptor((S,))
    strict = Windows.keyed_tumbling_window(lambda m: m.key, 10, *Windows.count())
    patient = Windows.keyed_tumbling_window(lambda m: m.key, 10, *Windows.count(), allowed_lateness_ms=100)
    stream = app.input(S)
    stream.window(strict, "strict").map(lambda p: ("strict", p.value)).send_to("parquet.windows")
    stream.window(patient, "patient").map(lambda p: ("patient", p.value)).send_to("parquet.windows")
    stream.filter(lambda m: m.value == "raw").send_to("parquet.windows")
    j = job(app)
    out, late = j.batch([("a", 1, None), ("a", 20, None), ("a", 2, "raw")])
    assert out == ["raw", ("strict", 1)] and "'strict'" in late[2] and "'patient'" not in late[2]
    assert j.batch([("a", 500, None)])[0] == [("strict", 1), ("patient", 2), ("patient", 1)]  # windows fire in declaration order


def test_panes_are_values_of_their_own():
    p = WindowPane("a", 0, 10, 3)
    assert p.as_dict() == pane("a", 0, 10, 3)


def test_window_state_moves_with_its_keys_on_a_rescale(job):
    """A rescale moves every entry by the bucket of its key (as state rescale does). Splitting 1 -> 2 gives each
    new task the largest mark of its keys as its watermark: a window closed before stays closed. Merging 2 -> 1
    gives the max of the two watermarks."""
    fast = next(k for k in (f"u{i}" for i in range(100)) if key_hash(k.encode()) % 2 == 0)
    slow = next(k for k in (f"u{i}" for i in range(100)) if key_hash(k.encode()) % 2 == 1)
    app = tumbling_app()
    one = job(app)
    # slow's window [0, 10) is closed by fast's progress (watermark 100), at factor 1
    assert one.batch([(slow, 5, None), (fast, 100, None)])[0] == [pane(slow, 0, 10, 1)]
    one.batch([(fast, 101, None)])  # a later batch without slow: its mark stays 100
    store = app.stores["per-ten"]
    halves = [job(app, TaskName(f"Partition_0-{b}-2")) for b in range(2)]
    for b, half in enumerate(halves):
        half.load("per-ten", [(k, v) for k, v in one.entries("per-ten") if bucket_of(store, k, 2) == b])
    # slow's task: watermark 100 (slow's mark, not fast's 101): slow@7 is still late, [0, 10) is not emitted again
    out, late = halves[1].batch([(slow, 7, None), (slow, 102, None)])
    assert out == [] and list(late) == [0] and "watermark 100" in late[0]
    assert halves[0].batch([(fast, 111, None)])[0] == [pane(fast, 100, 110, 2)]  # fast's open window moved with it
    merged = job(app)
    merged.load("per-ten", [e for half in halves for e in half.entries("per-ten")])
    # watermark max(111, 102) from the start: slow's [100, 110) is closed, and comes out with the next batch
    out, late = merged.batch([(fast, 112, None), (slow, 108, None)])
    assert out == [pane(slow, 100, 110, 1)] and "watermark 112" in late[1]


# --- the split property --------------------------------------------------------------------

records = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 60), st.integers(0, 9)), max_size=40)


def run_split(app, recs, cuts) -> tuple[list, set]:
    root = Path(tempfile.mkdtemp(prefix="win-"))
    j = Job(app, root)
    try:
        out, late = [], set()
        bounds = [0, *sorted(cuts), len(recs)]
        for a, b in zip(bounds, bounds[1:], strict=False):
            o, f = j.batch(recs[a:b])
            out += o
            late |= {off for off, e in f.items() if "late record" in e}
        return out, late
    finally:
        j.close()
        shutil.rmtree(root)


def reference(kind, size, lateness, recs):
    """Per record in order: late if its window is closed by the records before it; the windows
    closed by the final watermark, by (end, start, key)."""
    wm, windows, late = None, {}, set()  # (key, start) -> [end, value]
    for off, (k, t, v) in enumerate(recs):
        if kind == "tumbling":
            start, end = t - t % size, t - t % size + size
            if wm is not None and wm >= end + lateness:
                late.add(off)
                continue
            windows.setdefault((k, start), [end, 0])[1] += v
        else:
            start, end = t, t + size
            if wm is not None and wm >= end + lateness:
                late.add(off)
                continue
            joined = [
                (s, e)
                for (kk, s), e in windows.items()
                if kk == k and not (wm is not None and wm >= e[0] + lateness) and t < e[0] and s < end
            ]
            total = v + sum(e[1] for _, e in joined)
            for s, e in joined:
                del windows[(k, s)]
                start, end = min(start, s), max(end, e[0])
            windows[(k, start)] = [end, total]
        wm = t if wm is None else max(wm, t)
    closed = [pane(k, s, e, val) for (k, s), (e, val) in windows.items() if wm is not None and wm >= e + lateness]
    return sorted(closed, key=lambda p: (p["end"], p["start"], p["key"])), late


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    recs=records,
    data=st.data(),
    kind=st.sampled_from(["tumbling", "session"]),
    size=st.integers(1, 15),
    lateness=st.integers(0, 10),
)
def test_any_split_into_batches_emits_what_one_batch_emits(recs, data, kind, size, lateness):
    cuts = data.draw(st.lists(st.integers(0, len(recs)), max_size=5))
    agg = Windows.sum(lambda m: m.value)
    make = tumbling_app if kind == "tumbling" else session_app
    app = make(size, lateness, agg) if kind == "tumbling" else make(size, lateness, agg)
    one = run_split(app, recs, [])
    assert one == reference(kind, size, lateness, recs)
    assert run_split(app, recs, cuts) == one
