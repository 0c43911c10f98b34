"""JobLagTrigger's run() as the triggerer runs it, outside Airflow's processes: a real broker, a real SQLite
checkpoint store, the connections from AIRFLOW_CONN_* as Airflow resolves them. Records produced start an
event within a few polls; nothing waiting, or a run holding the lease, starts none; one burst gives one event
until a run is seen."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from elasticity.airflow.lag_trigger import JobLagTrigger
from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import load_config
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from tests.support.helpers import fresh_topic, job_props, write_properties

POLL_MS = 200
QUIET_POLLS = 10  # a quiet stretch: this many polls with no event


@pytest.fixture
def job(kafka_bootstrap, tmp_path, monkeypatch):
    topic = fresh_topic(kafka_bootstrap, "lagwatch", 2)
    name = f"lag{uuid.uuid4().hex[:6]}"
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    props = job_props(name, topic, tmp_path, **{"systems.kafka.default.stream.samza.offset.default": "upcoming"})
    props.pop("task.checkpoint.store.url")  # the elasticity_store connection says where the store is
    path = write_properties(tmp_path / f"{name}.properties", props)
    host, port = kafka_bootstrap.split(",")[0].rsplit(":", 1)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "elasticity_kafka", "host": host, "port": int(port)})
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_ELASTICITY_STORE", json.dumps({"conn_type": "elasticity_checkpoint_store", "extra": {"url": store_url}})
    )
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("ELASTICITY_CHECKPOINT_STORE_URL", raising=False)
    store = CheckpointStore(store_url)
    config = load_config(path)
    JobCoordinator(
        config, store, KafkaInputs(config.with_overrides({"systems.kafka.consumer.bootstrap.servers": kafka_bootstrap}))
    ).initialize()
    yield name, topic, path, store
    store.close()


def test_records_start_one_event_per_burst_and_none_under_a_live_run(job, kafka_bootstrap):
    name, topic, path, store = job
    trigger = JobLagTrigger(job=name, config_path=str(path), poll_ms=POLL_MS, cooldown_ms=600_000)
    classpath, kwargs = trigger.serialize()
    assert classpath == "elasticity.airflow.lag_trigger.JobLagTrigger" and kwargs["job"] == name
    assert JobLagTrigger(**kwargs).serialize() == (classpath, kwargs)  # the triggerer rebuilds it from these

    async def scenario() -> list[dict]:
        events: asyncio.Queue[dict] = asyncio.Queue()

        async def watch() -> None:
            async for event in trigger.run():
                events.put_nowait(event.payload)

        async def quiet() -> None:
            await asyncio.sleep(QUIET_POLLS * POLL_MS / 1000)
            assert events.empty()

        watcher = asyncio.create_task(watch())
        seen = []
        await quiet()  # caught up: nothing waits
        store.acquire_lease(name, "run-1", 60_000)  # a run is on: records arriving now are its
        await asyncio.to_thread(send, kafka_bootstrap, topic, demo_records(5, keys=5, seed=1))
        await quiet()
        # a lease that ends before its run read them (the records came after its last batch): they start a run
        store.release_lease(name, "run-1")
        seen.append(await asyncio.wait_for(events.get(), 50 * POLL_MS / 1000))
        await asyncio.to_thread(send, kafka_bootstrap, topic, demo_records(5, keys=5, seed=2))
        await quiet()  # the same burst, no run seen yet: no second event
        store.acquire_lease(name, "run-2", 60_000)  # the run it asked for comes, and ends without reading
        await asyncio.sleep(3 * POLL_MS / 1000)
        store.release_lease(name, "run-2")
        seen.append(await asyncio.wait_for(events.get(), 50 * POLL_MS / 1000))
        watcher.cancel()
        return seen

    assert asyncio.run(scenario()) == [{"job": name, "lag": 5, "must_run": False}, {"job": name, "lag": 10, "must_run": False}]


def test_a_new_job_starts_its_first_run(kafka_bootstrap, tmp_path, monkeypatch):
    """With no generation yet, the first run (which creates it) is asked for whatever the lag."""
    topic = fresh_topic(kafka_bootstrap, "lagnew", 1)
    name = f"new{uuid.uuid4().hex[:6]}"
    path = write_properties(tmp_path / f"{name}.properties", job_props(name, topic, tmp_path))
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)

    async def first() -> dict:
        events = JobLagTrigger(job=name, config_path=str(path), poll_ms=POLL_MS).run()
        event = await asyncio.wait_for(anext(events), 50 * POLL_MS / 1000)
        await events.aclose()
        return event.payload

    assert asyncio.run(first()) == {"job": name, "lag": 0, "must_run": True}
