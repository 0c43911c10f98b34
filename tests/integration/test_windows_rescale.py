"""Windows and the stream-table join through stateful rescales 2 -> 8 -> 3, on a
classic Spark session with the blob store on the S3-protocol server: the sessions app
(tests.support.apps:sessions_with_joined_clicks, which also writes every joined click), batches at
factor 2, a rescale to 8 with lag left, a profile update, more batches, a rescale to 3 with lag
left, more batches.

Event time grows with the send order, so within a partition it grows with the offset: every
task of a partition advances to the same offset, its watermark (the largest event time it has
folded in, or after a rescale the largest mark of its keys) is never above the event time of a
record it has not read, and no click is ever late, whatever the grouping. Each key's windows
are then a function of that key's clicks alone, and the check is exact per key: the panes
emitted plus the windows left open in the committed store are the panes a reference computes
from all the key's clicks (a lost or duplicated entry in the move changes a count), none twice,
and emitted exactly when closed by the final watermark of the key's task; the tier every
click was joined with is the table at the side-input offsets recorded with its batch's plan;
per key, processing and emission follow offsets.
"""

from __future__ import annotations

import json
import random
import re
import struct
import uuid
from collections import defaultdict

import pytest

from elasticity.api.stream import load_application
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.keybucket import key_hash
from elasticity.kafka.consumer import KafkaInputs, read_log
from elasticity.kafka.producer import send
from elasticity.quality.state_check import committed_state
from elasticity.spark.engine import MicroBatchEngine
from tests.integration.test_stateful_engine import run_cli
from tests.integration.test_windows_engine import job_props, table_at

APP = "tests.support.apps:sessions_with_joined_clicks"
MINUTE, GAP, LATENESS = 60_000, 30_000, 10_000
USERS = 24
WINDOWS = (("clicks-per-minute", "tumbling"), ("sessions", "session"))


@pytest.fixture
def job(kafka_bootstrap, tmp_path, monkeypatch, s3_server):
    topic = f"wr-{uuid.uuid4().hex[:8]}"
    props = job_props(kafka_bootstrap, monkeypatch, topic, tmp_path) | {
        "app.class": APP,
        "blob.store.uri": s3_server.uri(f"winrescale-{uuid.uuid4().hex[:8]}"),
    }
    return topic, f"{topic}-users", props, tmp_path


def profiles(bootstrap, topic, version):
    send(bootstrap, topic, [(f"u{i}".encode(), json.dumps({"tier": f"tier-{i % 3}-v{version}"}).encode()) for i in range(USERS)])


def clicks(bootstrap, topic, n, t, seed):
    """`n` clicks 0.1 to 2.3 s apart in event time, in send order: about 29 s apart per user, so sessions
    of one click and of several, and one to a few clicks per user and minute. Returns the last event time."""
    rng = random.Random(seed)
    records = []
    for _ in range(n):
        t += rng.randrange(100, 2300)
        user = f"u{rng.randrange(USERS)}"
        records.append((user.encode(), json.dumps({"user": user, "ts": t, "amount": rng.randrange(1, 50)}).encode()))
    send(bootstrap, topic, records)
    return t


def reference_panes(kind, clicks_of_key):
    """One key's clicks [(partition, offset, ts, amount, tier)] in offset order, none late -> {start: (end, value, offset of the last click)}."""
    panes = {}
    if kind == "tumbling":
        for _, offset, ts, _, _ in clicks_of_key:
            start = ts - ts % MINUTE
            end, n, _ = panes.get(start, (start + MINUTE, 0, None))
            panes[start] = (end, n + 1, offset)
        return panes
    start = None
    for _, offset, ts, amount, tier in clicks_of_key:
        if start is not None and ts < panes[start][0]:  # within the gap of the session's last click: it joins
            end, v, _ = panes[start]
            panes[start] = (ts + GAP, {"clicks": v["clicks"] + 1, "amount": v["amount"] + amount, "tier": tier}, offset)
        else:
            start = ts
            panes[start] = (ts + GAP, {"clicks": 1, "amount": amount, "tier": tier}, offset)
    return panes


def committed_windows(config, store):
    """Per window store, from the current checkpoints' snapshots: key -> {start: (end, value)} of the open
    windows, and key -> the key's mark (the task's watermark when it last touched the key)."""
    app = load_application(config.app_class, config.inputs)
    gen = store.generation(config.job_name)
    cps = JobCoordinator(config, store, KafkaInputs(config)).checkpoints(gen)
    state = committed_state(config, app, gen, cps)
    out = {}
    for name, _ in WINDOWS:
        open_, marks = defaultdict(dict), {}
        for raw, entry in state[name].items():
            if raw[:1] in (b"w", b"m"):
                (n,) = struct.unpack(">I", raw[1:5])
                user = raw[5 : 5 + n].decode()
                if raw[:1] == b"m":
                    marks[user] = entry
                else:
                    open_[user][struct.unpack(">Q", raw[5 + n :])[0] - (1 << 63)] = (entry["end"], entry["value"])
        out[name] = (open_, marks)
    return out


def assert_windows_and_join(config, store, clicks_topic, users_topic, bootstrap, factor):
    """Everything the module doc promises, per key, over all committed batches (of every generation)."""
    job = config.job_name
    committed = set(store.batches_with_status(job, "committed"))
    audit = [r for r in read_table(config.get("job.audit.path"), AUDIT_SCHEMA).to_pylist() if r["batch_id"] in committed]
    batch_of = {(r["partition"], r["offset"]): r["batch_id"] for r in audit}
    assert len(batch_of) == len(audit), "a click processed twice"
    assert {r["status"] for r in audit} == {"processed"}
    dead = [
        r for r in read_table(config.get("job.dead.letter.path"), DEAD_LETTER_SCHEMA).to_pylist() if r["batch_id"] in committed
    ]
    assert dead == [], dead[:3]  # event time grows with the offset: nothing is late, under any grouping
    read_to = {b: {s.stream: o for s, o in store.plan(job, b)[0].side_inputs}[users_topic] for b in committed}
    log = read_log(bootstrap, users_topic)
    tables = {b: table_at(log, end) for b, end in read_to.items()}

    by_key, partition_of = defaultdict(list), {}
    for p in range(2):
        for offset, k, v, _ in read_log(bootstrap, clicks_topic, p):
            click, user = json.loads(v), k.decode()
            tier = tables[batch_of[(p, offset)]].get(user, {}).get("tier")
            by_key[user].append((p, offset, click["ts"], click["amount"], tier))
            assert partition_of.setdefault(user, p) == p
    assert sum(map(len, by_key.values())) == len(audit) == len(batch_of)

    # per key, the audit (processing) order is the offset order
    processed = defaultdict(list)
    for r in sorted(audit, key=lambda r: (r["batch_id"], r["task_name"], r["seq"])):
        processed[r["key"].decode()].append(r["offset"])
    assert processed == {u: [c[1] for c in cs] for u, cs in by_key.items()}

    # the join: every click carries the tier of the table as its batch's plan fixed it, in offset order per key
    sink = [
        r for r in read_table(f"{config.get('job.output.path')}/joined", OUTPUT_SCHEMA).to_pylist() if r["batch_id"] in committed
    ]
    joined = defaultdict(list)
    for r in sorted(sink, key=lambda r: (r["batch_id"], r["task_name"], r["seq"])):
        joined[r["key"].decode()].append((r["source_partition"], r["source_offset"], json.loads(r["value"])["tier"]))
    assert joined == {u: [(p, o, tier) for p, o, _, _, tier in cs] for u, cs in by_key.items()}

    state = committed_windows(config, store)
    task_of = {u: (p, key_hash(u.encode()) % factor) for u, p in partition_of.items()}
    least, latest = defaultdict(int), defaultdict(int)
    for u, cs in by_key.items():
        least[task_of[u]] = max(least[task_of[u]], cs[-1][2])
        latest[partition_of[u]] = max(latest[partition_of[u]], cs[-1][2])
    counts = {}
    for name, kind in WINDOWS:
        open_, marks = state[name]
        watermark = defaultdict(lambda: None)  # of each final task: the largest mark in its store
        for u, mark in marks.items():
            watermark[task_of[u]] = max(mark, watermark[task_of[u]] or mark)
        rows = [
            r
            for r in read_table(f"{config.get('job.output.path')}/{name}", OUTPUT_SCHEMA).to_pylist()
            if r["batch_id"] in committed
        ]
        emitted = defaultdict(list)
        for r in sorted(rows, key=lambda r: (r["batch_id"], r["task_name"], r["seq"])):
            pane = json.loads(r["value"])
            assert pane["key"] == r["key"].decode()
            emitted[pane["key"]].append((pane["start"], pane["end"], pane["value"], r["source_offset"]))
        closed_count = open_count = 0
        for u, cs in by_key.items():
            ref = reference_panes(kind, cs)
            wm = watermark[task_of[u]]
            # at least every click of the task's keys (each key's mark is at least its last click), at most the partition's last
            assert least[task_of[u]] <= wm <= latest[partition_of[u]], (name, u, wm)
            got = emitted.get(u, [])
            assert len({s for s, *_ in got}) == len(got), f"{name}: a pane of {u!r} emitted twice: {got}"
            assert [e for _, e, _, _ in got] == sorted(e for _, e, _, _ in got), f"{name}: panes of {u!r} out of order"
            closed = {s: (e, v, o) for s, e, v, o in got}
            should = {s: p for s, p in ref.items() if p[0] + LATENESS <= wm}
            assert closed == should, f"{name}, {u!r} at watermark {wm}: emitted {closed}, reference {should}"
            still = {s: (e, v) for s, (e, v, _) in ref.items() if s not in should}
            assert open_.get(u, {}) == still, f"{name}, {u!r}: open in the store {open_.get(u)}, reference {still}"
            closed_count, open_count = closed_count + len(closed), open_count + len(still)
        assert set(open_) <= set(by_key) and set(marks) == set(by_key)
        counts[name] = (closed_count, open_count)
    return counts, tables


def dry_run_transfers(props, tmp_path, factor):
    """`elasticity rescale --dry-run`: (task, store) -> (keys, bytes) from its per-task listing."""
    dry = run_cli(props, tmp_path, "--factor", str(factor), "--dry-run", command="rescale")
    assert dry.returncode == 0, dry.stderr[-3000:]
    listed = re.findall(r"^  (\S+) <- (\S+(?: \+ \S+)*): (\S+) ([\d,]+) keys, ([\d,]+) bytes$", dry.stdout, re.M)
    return {(t, store): (int(k.replace(",", "")), int(b.replace(",", ""))) for t, _, store, k, b in listed}, dry.stdout


def test_windows_and_join_through_rescales_2_to_8_to_3_on_s3(spark, kafka_bootstrap, job):
    clicks_topic, users_topic, props, tmp_path = job
    profiles(kafka_bootstrap, users_topic, 1)
    t = clicks(kafka_bootstrap, clicks_topic, 240, 1_700_000_000_000, seed=31)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=120, until_caught_up=True)
    t = clicks(kafka_bootstrap, clicks_topic, 120, t, seed=32)
    assert engine.run(max_records=60)[-1].lag_left > 0  # the rescale comes with lag left

    # the dry run lists, per new task and window store (composite keys: window, timer, mark), what it would receive
    listed, stdout = dry_run_transfers(props, tmp_path, 8)
    assert {s for _, s in listed} == {"clicks-per-minute", "sessions"} and len(listed) == 2 * 2 * 8, stdout
    print(stdout)
    plans = []
    for factor in (8, 3):
        plan = JobCoordinator(config, engine.store, engine.inputs).rescale(factor)
        moved = {(tr.task.name, tr.store): (tr.keys, tr.bytes) for tr in plan.state.transfers if tr.how == "moved"}
        assert len(moved) == 2 * 2 * factor and sum(k for k, _ in moved.values()) > 0, moved  # some buckets hold no user
        plans.append(plan)
        if factor == 8:
            assert moved == listed  # the dry run counted what the move then moved
            profiles(kafka_bootstrap, users_topic, 2)  # the batches at 8 see the update; a replay would not
            t = clicks(kafka_bootstrap, clicks_topic, 150, t, seed=33)
            engine.run(max_records=90, until_caught_up=True)
            t = clicks(kafka_bootstrap, clicks_topic, 100, t, seed=34)
            assert engine.run(max_records=50)[-1].lag_left > 0
        else:
            t = clicks(kafka_bootstrap, clicks_topic, 150, t, seed=35)
            assert engine.run(max_records=120, until_caught_up=True)[-1].lag_left == 0

    counts, tables = assert_windows_and_join(
        config, CheckpointStore(config.checkpoint_store_url()), clicks_topic, users_topic, kafka_bootstrap, factor=3
    )
    print("panes emitted, open:", counts, "state moved:", [(p.state.new_factor, p.metrics["state-move-ns"]) for p in plans])
    assert all(closed > 50 and still > 0 for closed, still in counts.values()), counts
    assert {t["u1"]["tier"] for t in tables.values()} == {"tier-1-v1", "tier-1-v2"}
