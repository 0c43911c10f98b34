"""Windows and a stream-table join on the engine (elasticity.apps.sessions:build): clicks joined
with a side-input table of user profiles, counted per minute and grouped into sessions, over
several batches on a classic Spark session with async commits, a driver killed while an
upload runs, a profile update before the rerun, and more clicks after it. The committed
windows, per virtual task and in emission order, and the late records in the dead letters,
equal a reference computed here from the topics, each click joined with the table as it was
at the side-input offsets recorded with the plan of the batch that processed it."""

from __future__ import annotations

import json
import os
import random
import uuid
from collections import defaultdict

import pytest

from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.keybucket import key_hash
from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import read_log
from elasticity.kafka.producer import send
from elasticity.spark.engine import MicroBatchEngine
from tests.integration.test_stateful_engine import run_cli

APP = "elasticity.apps.sessions:build"
MINUTE, GAP, LATENESS = 60_000, 30_000, 10_000
FACTOR = 2


@pytest.fixture
def job(kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    return topic, f"{topic}-users", job_props(kafka_bootstrap, monkeypatch, topic, tmp_path), tmp_path


def job_props(bootstrap, monkeypatch, topic, tmp_path):
    """Topics `topic` (2 partitions) and `<topic>-users` (the side input) created; the job's properties."""
    users = f"{topic}-users"
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, users, 1)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap)
    return {
        "job.name": f"win-{topic}",
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": str(FACTOR),
        "job.container.count": "2",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "app.class": APP,
        "stores.users.side.inputs": f"kafka.{users}",
        "task.checkpoint.read.versions": "2,1",
        "stores.backup.factories": "blobstore",
        "blob.store.uri": str(tmp_path / "blobs"),
        "job.state.dir": str(tmp_path / "state"),
        "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
        "task.commit.timeout.ms": "60000",
        "spark.master": "local[2]",
    }


def profiles(bootstrap, topic, version):
    send(bootstrap, topic, [(f"u{i}".encode(), json.dumps({"tier": f"tier-{i % 3}-v{version}"}).encode()) for i in range(8)])


def clicks(bootstrap, topic, n, start, seed):
    """Clicks about 4 s apart in event time per stream, every 13th 90 s in the past (late for some windows)."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        ts = start + i * 4000 + rng.randrange(3000) - (90_000 if i % 13 == 12 else 0)
        user = f"u{rng.randrange(8)}"
        records.append((user.encode(), json.dumps({"user": user, "ts": ts, "amount": rng.randrange(1, 50)}).encode()))
    send(bootstrap, topic, records)
    return start + n * 4000


def table_at(log, end):
    table = {}
    for offset, k, v, _ in log:
        if offset < end:
            if v is None:
                table.pop(k.decode(), None)
            else:
                table[k.decode()] = json.loads(v)
    return table


def windows(kind, records):
    """One virtual task's records (key, ts, item) in offset order -> (closed windows by (end, start, key), late offsets)."""
    size = MINUTE if kind == "tumbling" else GAP
    wm, open_, late = None, {}, set()

    def closed(end):
        return wm is not None and wm >= end + LATENESS

    for off, key, t, item in records:
        if kind == "tumbling":
            start, end = t - t % size, t - t % size + size
            if closed(end):
                late.add(off)
                continue
            open_.setdefault((key, start), [end, 0])[1] += 1
        else:
            start, end = t, t + size
            if closed(end):
                late.add(off)
                continue
            joined = sorted((s, e) for (k, s), e in open_.items() if k == key and not closed(e[0]) and t < e[0] and s < end)
            value = None
            for s, e in joined:
                value = (
                    e[1]
                    if value is None
                    else {
                        "clicks": value["clicks"] + e[1]["clicks"],
                        "amount": value["amount"] + e[1]["amount"],
                        "tier": e[1]["tier"],
                    }
                )
                del open_[(key, s)]
                start, end = min(start, s), max(end, e[0])
            value = value or {"clicks": 0, "amount": 0, "tier": None}
            open_[(key, start)] = [
                end,
                {"clicks": value["clicks"] + 1, "amount": value["amount"] + item["amount"], "tier": item["tier"]},
            ]
        wm = t if wm is None else max(wm, t)
    out = [{"key": k, "start": s, "end": e, "value": v} for (k, s), (e, v) in open_.items() if closed(e)]
    return sorted(out, key=lambda p: (p["end"], p["start"], p["key"])), late


def assert_windows(config, store, clicks_topic, users_topic, bootstrap):
    job = config.job_name
    committed = set(store.batches_with_status(job, "committed"))
    audit = [r for r in read_table(config.get("job.audit.path"), AUDIT_SCHEMA).to_pylist() if r["batch_id"] in committed]
    batch_of = {(r["partition"], r["offset"]): r["batch_id"] for r in audit}
    assert len(batch_of) == len(audit), "a click processed twice"
    read_to = {b: {s.stream: o for s, o in store.plan(job, b)[0].side_inputs}[users_topic] for b in committed}
    log = read_log(bootstrap, users_topic)
    tables = {b: table_at(log, end) for b, end in read_to.items()}

    per_task = defaultdict(list)
    for p in range(2):
        for offset, k, v, _ in read_log(bootstrap, clicks_topic, p):
            click = json.loads(v)
            tier = tables[batch_of[(p, offset)]].get(k.decode(), {}).get("tier")
            per_task[(p, key_hash(k) % FACTOR)].append((offset, k.decode(), click["ts"], {**click, "tier": tier}))
    assert sum(map(len, per_task.values())) == len(audit)

    late = set()
    for output, kind, window in (("clicks-per-minute", "tumbling", "clicks-per-minute"), ("sessions", "session", "sessions")):
        sink = [
            r
            for r in read_table(f"{config.get('job.output.path')}/{output}", OUTPUT_SCHEMA).to_pylist()
            if r["batch_id"] in committed
        ]
        got = defaultdict(list)
        for r in sorted(sink, key=lambda r: (r["task_name"], r["batch_id"], r["seq"])):
            got[r["task_name"]].append(json.loads(r["value"]))
        by_task = {}
        for task, panes in got.items():
            (source,) = {(r["source_partition"], key_hash(r["key"]) % FACTOR) for r in sink if r["task_name"] == task}
            by_task[source] = panes
        expected = {}
        for task, records in per_task.items():
            panes, late_offsets = windows(kind, records)
            late |= {(task[0], o, window) for o in late_offsets}
            if panes:
                expected[task] = panes
        assert by_task == expected, output
        assert sum(map(len, expected.values())) > 3
    dead = [
        r for r in read_table(config.get("job.dead.letter.path"), DEAD_LETTER_SCHEMA).to_pylist() if r["batch_id"] in committed
    ]
    assert {(r["partition"], r["offset"], r["error"].split("'")[1]) for r in dead} == late and late
    assert all("late record" in r["error"] and "closed at watermark" in r["error"] for r in dead)
    return tables


def test_windows_and_join_over_batches_a_killed_driver_and_a_rerun(spark, kafka_bootstrap, job):
    clicks_topic, users_topic, props, tmp_path = job
    profiles(kafka_bootstrap, users_topic, 1)
    t = clicks(kafka_bootstrap, clicks_topic, 150, 1_700_000_000_000, seed=21)
    config = validate(props)
    first = MicroBatchEngine(config, spark).run(max_records=50)[0]
    assert (
        first.metrics["store-metrics"]["sessions"]["puts"] > 0 and first.metrics["store-metrics"]["clicks-per-minute"]["puts"] > 0
    )

    # the driver dies while an async commit uploads: the batches planned so far are replayed by the rerun
    killed = run_cli(props, tmp_path, "--max-records", "30", "--until-caught-up", fault="commit.upload:kill")
    assert killed.returncode == 137, killed.stderr[-3000:]
    store = CheckpointStore(config.checkpoint_store_url())
    replayed = store.pending_plan(config.job_name)
    assert replayed is not None and replayed.side_inputs
    profiles(kafka_bootstrap, users_topic, 2)  # after the replayed plans: they must still see version 1

    engine = MicroBatchEngine(config, spark)
    assert engine.run(max_records=30, until_caught_up=True, owner="airflow-run-1")[-1].lag_left == 0
    clicks(kafka_bootstrap, clicks_topic, 60, t, seed=22)
    engine.run(max_records=40, until_caught_up=True, owner="airflow-run-1")
    tables = assert_windows(config, engine.store, clicks_topic, users_topic, kafka_bootstrap)
    tiers = {t["u1"]["tier"] for t in tables.values()}
    assert tiers == {"tier-1-v1", "tier-1-v2"}  # batches before and after the update, replays included
    assert os.listdir(tmp_path / "state" / "side-inputs" / "users")  # the table's copies, one per process slot
