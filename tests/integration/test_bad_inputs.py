"""Broken inputs on a real broker (the embedded one: DeleteRecords, a topic deleted and recreated) under the
engine on a classic Spark session: a truncated partition fails the batch naming it, or is declared lost by
policy; a recreated topic always fails; an output the broker refuses (larger than its topic's max.message.bytes,
which the embedded broker enforces as Kafka does) is dead-lettered or fails the batch by policy, never replayed
without end; nothing is skipped silently."""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from elasticity.batch.coordinator.log_bounds import InputTruncatedError
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.store import StoreError
from elasticity.config import validate
from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.kafka.transactions import OutputRefused, read_committed
from elasticity.quality.runner import run_quality
from elasticity.spark.engine import BatchFailed, MicroBatchEngine
from tests.conftest import REPO
from tests.integration.test_engine import ELASTICITY


def records(start: int, n: int) -> list[tuple[bytes, bytes]]:
    return [(b"user-%d" % (i % 7), b'{"order_id": %d, "amount": 1}' % i) for i in range(start, start + n)]


@pytest.fixture
def job(kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"bad-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 1)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    props = {
        "job.name": f"bad-{topic}",
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "app.class": "elasticity.apps.identity:build",
        "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
    }
    send(kafka_bootstrap, topic, records(0, 20))
    return topic, props, tmp_path


def audited_offsets(tmp_path) -> list[int]:
    return sorted(r["offset"] for r in read_table(str(tmp_path / "audit"), AUDIT_SCHEMA).to_pylist())


def delete_records(bootstrap: str, topic: str, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_records([TopicPartition(topic, 0, before)]).values():
        f.result()


def test_a_truncated_partition_fails_by_default_and_is_declared_lost_under_skip_to_earliest(spark, kafka_bootstrap, job):
    topic, props, tmp_path = job
    engine = MicroBatchEngine(validate(props), spark)
    engine.run(until_caught_up=True)
    assert audited_offsets(tmp_path) == list(range(20))
    send(kafka_bootstrap, topic, records(20, 10))  # offsets 20..29
    delete_records(kafka_bootstrap, topic, 25)  # retention took 20..24 before the job read them

    with pytest.raises(InputTruncatedError) as e:
        engine.run(until_caught_up=True)
    assert f"topic {topic!r} partition 0: the checkpoint of Partition_0-" in str(e.value)
    assert "is at offset 20, but the log starts at 25: records 20..24 were removed" in str(e.value)
    assert audited_offsets(tmp_path) == list(range(20))  # nothing committed past the hole

    skip = MicroBatchEngine(validate({**props, "task.input.truncation.policy": "skip-to-earliest"}), spark)
    summary = skip.run(until_caught_up=True)[0]
    assert audited_offsets(tmp_path) == [*range(20), *range(25, 30)]
    declared = sorted((r["start"], r["end"]) for r in summary.lost)
    assert declared and all(r == (20, 25) for r in declared)  # every virtual task of the partition, 20..24
    assert {r["task_name"] for r in summary.lost} == {t.name for t in skip.coordinator.checkpoints(skip.coordinator.current())}
    kept = {m["batch_id"]: m for m in skip.store.metrics(props["job.name"])}
    assert kept[summary.batch_id]["lost"] == summary.lost  # kept with the batch, for data quality and the page

    config = validate(props)
    result, _ = run_quality(config, skip.store, KafkaInputs(config), report_dir=tmp_path / "report")
    failed = {c.name: c for c in result.checks if not c.success}
    assert set(failed) == {"no_declared_loss"}, result.failure_message()  # declared, and nothing else wrong
    assert failed["no_declared_loss"].unexpected == len(summary.lost)
    assert f"{topic}-0 offsets 20..24" in result.failure_message()


def test_a_recreated_topic_fails_whatever_the_policy(spark, kafka_bootstrap, job):
    topic, props, tmp_path = job
    props = {**props, "task.input.truncation.policy": "skip-to-earliest"}
    MicroBatchEngine(validate(props), spark).run(until_caught_up=True)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.delete_topics([topic])[topic].result()
    deadline = time.monotonic() + 30
    while not create_topic(kafka_bootstrap, topic, 1):  # the deletion completes in the background
        assert time.monotonic() < deadline, "the topic was not recreated"
        time.sleep(0.2)
    send(kafka_bootstrap, topic, records(100, 5))  # the new log: offsets 0..4, below the checkpoint at 20

    with pytest.raises(InputTruncatedError, match=r"is at offset 20, past the log's end 5: the topic was deleted and recreated"):
        MicroBatchEngine(validate(props), spark).run(until_caught_up=True)
    assert audited_offsets(tmp_path) == list(range(20))


def test_a_checkpoint_without_one_of_its_tasks_partitions_is_refused_on_read_and_on_write(spark, kafka_bootstrap, job, tmp_path):
    """A checkpoint row cut short outside the product (an input partition's offset gone) must not make the task
    read that partition from nowhere: reading it fails naming task and partition, and checkpoint-tool write
    refuses such a file."""
    import json

    from elasticity.batch.coordinator.job_coordinator import JobCoordinator
    from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
    from elasticity.checkpoint.tool import checkpoints_to_tool_json
    from tests.support.helpers import write_properties

    topic, props, _ = job
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(until_caught_up=True)
    coordinator = JobCoordinator(config, engine.store, KafkaInputs(config))
    generation = coordinator.current()
    cps = coordinator.checkpoints(generation)
    victim = sorted(cps)[0]
    (ssp,) = cps[victim].offsets
    cut = TaskCheckpoint.of_offsets(victim, {})
    written = json.dumps(checkpoints_to_tool_json([cut, *(cps[t] for t in sorted(cps)[1:])]))

    path = write_properties(tmp_path / "job.properties", props)
    (tmp_path / "cut.json").write_text(written)
    refused = subprocess.run(
        [ELASTICITY, "checkpoint-tool", "write", str(tmp_path / "cut.json"), "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and f"task {victim.name!r} has no offset for ['{ssp}']" in refused.stderr, refused.stderr
    assert coordinator.checkpoints(generation) == cps  # nothing written

    engine.store.replace_checkpoints(  # the row cut short behind the product's back
        config.job_name, generation.number, [cut], write_versions=config.checkpoint_write_versions, owner=None
    )
    send(kafka_bootstrap, topic, records(20, 5))
    with pytest.raises(
        StoreError, match=rf"1 input partitions without an offset in their task's checkpoint, e.g. \['{victim.name}: "
    ):
        engine.run(until_caught_up=True)
    assert audited_offsets(tmp_path) == list(range(20))


@pytest.fixture
def private_postgres():
    """Its folder straight under /tmp: the server runs as the postgres user, who cannot enter pytest's root-only
    temporary folders."""
    import shutil
    import tempfile
    from pathlib import Path

    from elasticity.local.daemon import free_port
    from elasticity.local.private_postgres import PrivatePostgres

    folder = Path(tempfile.mkdtemp(prefix="elasticity-pg-"))
    folder.chmod(0o755)
    server = PrivatePostgres(folder / "server", free_port()).start()
    yield server
    with contextlib.suppress(subprocess.CalledProcessError):
        server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_a_store_outage_mid_commit_commits_nothing_says_so_in_one_line_and_the_next_attempt_heals(
    spark, kafka_bootstrap, job, private_postgres
):
    """The store's PostgreSQL server stops inside a batch's checkpoint transaction: the attempt fails with a
    StoreUnavailable naming the store's address, the job and the step (the CLI prints it as one line), the
    batch is not committed, and once the server is back the next attempt waits out the lease the failed one
    could not release and replays the batch: every record once."""
    from elasticity import faults
    from elasticity.checkpoint.store import StoreUnavailable

    topic, props, tmp_path = job
    props["task.checkpoint.store.url"] = private_postgres.url
    props["job.lease.ttl.ms"] = "3000"  # the failed attempt cannot release its lease: the next one waits it out
    config = validate(props)
    MicroBatchEngine(config, spark).run(until_caught_up=True)
    send(kafka_bootstrap, topic, records(20, 10))

    def stop_inside_the_commit(point: str) -> None:
        if point == "commit.checkpoints_written":
            private_postgres.stop()

    with faults.hook(stop_inside_the_commit), pytest.raises(StoreUnavailable) as e:
        MicroBatchEngine(config, spark).run(until_caught_up=True)
    message = str(e.value)
    assert message.startswith(f"checkpoint store at postgresql+psycopg://postgres@127.0.0.1:{private_postgres.port}/postgres")
    assert f"failed while committing (fenced) of job {config.job_name!r}: " in message and "\n" not in message

    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    down = subprocess.run([ELASTICITY, "run-batch", "--config", str(path)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert down.returncode == 2 and down.stderr.strip().count("\n") == 0, down.stderr  # one line, no traceback
    assert f"checkpoint store unreachable at postgresql+psycopg://postgres@127.0.0.1:{private_postgres.port}" in down.stderr

    private_postgres.start()
    healed = MicroBatchEngine(config, spark)
    assert healed.run(until_caught_up=True)[0].replayed  # the batch the outage cut short, replayed
    assert audited_offsets(tmp_path) == list(range(30))  # each record once


REFUSED = b'{"order_id": 20, "amount": 1, "pad": 5000}'  # with its pad, 5 kB: over the output topic's 1 kB
REFUSAL = "refused by the broker: MESSAGE_TOO_LARGE"


def padded_job(kafka_bootstrap, job, guarantee: str, policy: str) -> tuple[str, dict[str, str]]:
    """The job fixture's topic copied to `<topic>-out`, made first with max.message.bytes=1024 (and to
    parquet.out); its 20 records committed, then record 20 among 21..24, padded past the output topic's limit."""
    topic, props, _ = job
    out = f"{topic}-out"
    create_topic(kafka_bootstrap, out, 1, {"max.message.bytes": "1024"})
    props = {
        **props,
        "app.class": "tests.support.apps:padded",
        "processing.guarantee": guarantee,
        "task.dead.letter.policy": policy,
    }
    return out, props


def order_ids(values) -> list[int]:
    import json

    return sorted(json.loads(v)["order_id"] for v in values)


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_an_output_the_broker_refuses_goes_to_the_dead_letters_under_dlq_and_the_rest_commits_once(
    spark, kafka_bootstrap, job, guarantee
):
    topic, _, tmp_path = job
    out, props = padded_job(kafka_bootstrap, job, guarantee, "dlq")
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(until_caught_up=True)
    send(kafka_bootstrap, topic, [(b"user-6", REFUSED), *records(21, 4)])
    summary = engine.run(until_caught_up=True)[0]
    assert summary.dead_lettered == 1 and summary.outputs == 2 * 5 - 1

    (letter,) = read_table(str(tmp_path / "dlq"), DEAD_LETTER_SCHEMA).to_pylist()
    assert (letter["stream"], letter["partition"], letter["offset"], letter["key"]) == (topic, 0, 20, b"user-6")
    assert letter["error"].startswith(f"output kafka.{out} partition 0 {REFUSAL}"), letter["error"]
    assert letter["batch_id"] == summary.batch_id and len(letter["value"]) > 5000  # the refused record itself
    committed = read_committed(kafka_bootstrap, out)
    assert order_ids(r.value for r in committed) == [i for i in range(25) if i != 20]  # every other output, once
    parquet = read_table(str(tmp_path / "out" / "out"), OUTPUT_SCHEMA).to_pylist()
    assert sorted(r["source_offset"] for r in parquet) == list(range(25))  # the record's other output kept
    assert audited_offsets(tmp_path) == list(range(25))

    assert engine.run(until_caught_up=True)[0].batch_id is None  # committed: nothing replays
    assert len(read_committed(kafka_bootstrap, out)) == 24
    result, _ = run_quality(config, engine.store, KafkaInputs(config), report_dir=tmp_path / "report")
    assert result.success, result.failure_message()  # the dead letter is declared, not a loss


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_an_output_the_broker_refuses_fails_the_batch_under_fail_naming_the_reason_on_every_attempt(
    spark, kafka_bootstrap, job, guarantee
):
    topic, _, tmp_path = job
    out, props = padded_job(kafka_bootstrap, job, guarantee, "fail")
    config = validate(props)
    MicroBatchEngine(config, spark).run(until_caught_up=True)
    send(kafka_bootstrap, topic, [(b"user-6", REFUSED), *records(21, 4)])
    refused = OutputRefused if guarantee == "exactly_once" else BatchFailed

    messages = []
    for _ in range(2):  # the next attempt fails the same way, at once: no endless replay
        engine = MicroBatchEngine(config, spark)
        with pytest.raises(refused) as e:
            engine.run(until_caught_up=True)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert f"output kafka.{out} partition 0 {REFUSAL}" in messages[0], messages[0]
    assert read_table(str(tmp_path / "dlq"), DEAD_LETTER_SCHEMA).num_rows == 0
    visible = order_ids(r.value for r in read_committed(kafka_bootstrap, out))
    committed = {m["batch_id"] for m in engine.store.metrics(props["job.name"])}
    if guarantee == "exactly_once":
        assert "task.dead.letter.policy=fail: nothing of the batch is committed" in messages[0]
        assert f"it derives from kafka.{topic}-0@20" in messages[0]
        assert visible == list(range(20)) and len(committed) == 1  # the first batch, once; the failing one never
    else:
        assert f"stopped at {topic}-0@20: " in messages[0]
        assert 20 not in visible and set(range(20)) <= set(visible)  # at least once: nothing of the record's
        assert max(audited_offsets(tmp_path)) < 25 and 20 not in audited_offsets(tmp_path)
