"""The jobs' metrics scraped by a real Prometheus server (Debian's package): the demo app's job runs a batch on
Spark and a rescale, a loopback HTTP server serves the exposition that `/elasticity/metrics` serves (the same
`JobsScrape`), Prometheus scrapes it every second, and PromQL through its HTTP API returns the job's lag, as the
store and the brokers have it, and the lag again after more records arrive (no batch in between)."""

import math
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from elasticity.airflow.metrics_endpoint import JobsScrape
from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.coordinator.lag import lag_report
from elasticity.checkpoint.store.pool import StorePool
from elasticity.config import validate
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.spark.engine import MicroBatchEngine
from tests.support.helpers import fresh_topic, job_props, write_properties
from tests.support.otlp import OtlpReceiver
from tests.support.prometheus import PrometheusServer

PATH = "/elasticity/metrics"


def serve(scrape: JobsScrape, job: str) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path != PATH:
                self.send_error(404)
                return
            body, content_type = scrape.render([job], self.headers.get("Accept"))
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def demo_job(spark, kafka_bootstrap, tmp_path_factory):
    """The demo app's job after a batch on Spark, a rescale and a failed attempt: its config, its first batch."""
    tmp = tmp_path_factory.mktemp("prom")
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = kafka_bootstrap  # put back after the module (tests/conftest.py)
    topic = fresh_topic(kafka_bootstrap, "prom", 2, records=500, seed=41)
    job = f"prom-{topic}"
    props = job_props(job, topic, tmp, factor=2, **{"app.class": "elasticity.apps.enrichment:build"})
    (tmp / "jobs").mkdir()
    write_properties(tmp / "jobs" / f"{job}.properties", props)
    os.environ["ELASTICITY_JOBS_DIR"] = str(tmp / "jobs")
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    (batch,) = engine.run(max_records=200)
    JobCoordinator(config, engine.store, engine.inputs).rescale(4)
    engine.store.record_failure(job, run_id="manual__prom", attempt=1, task="run_batches", error="RuntimeError: boom")
    return config, engine.store, batch, topic, tmp


def test_prometheus_scrapes_the_demo_job_s_lag(demo_job, kafka_bootstrap):
    config, store, batch, topic, tmp_path = demo_job
    job = config.job_name
    expected = lag_report(config, store, KafkaInputs(config))
    assert expected.exact and expected.total == 500 - batch.records_read > 0

    with StorePool() as stores:
        scrape = JobsScrape(stores)
        server = serve(scrape, job)
        prometheus = PrometheusServer(tmp_path, f"127.0.0.1:{server.server_port}", PATH).start()
        try:
            (lag,) = prometheus.until(f'elasticity_lag_records{{job="{job}"}}')
            assert float(lag["value"][1]) == expected.total
            assert lag["metric"]["instance"] == f"127.0.0.1:{server.server_port}"
            assert float(prometheus.until(f'elasticity_elasticity_factor{{job="{job}"}}')[0]["value"][1]) == 4
            assert float(prometheus.until(f'elasticity_virtual_tasks{{job="{job}"}}')[0]["value"][1]) == 8
            assert float(prometheus.until(f'elasticity_failed_attempts_last_hour{{job="{job}"}}')[0]["value"][1]) == 1
            parts = prometheus.until(f'sum(elasticity_partition_lag_records{{job="{job}"}})')
            assert float(parts[0]["value"][1]) == expected.total
            fresh = prometheus.until(f'elasticity_freshness_seconds{{job="{job}",record="oldest",quantile="0.99"}}')
            assert float(fresh[0]["value"][1]) == batch.freshness_ms["oldest"] / 1000
            phases = prometheus.until(f'elasticity_rescale_duration_seconds{{job="{job}"}}')
            assert {p["metric"]["phase"] for p in phases} == {"job_model_generation", "checkpoint_compute"}
            assert float(prometheus.until(f'elasticity_records_per_second{{job="{job}"}}')[0]["value"][1]) > 0

            send(kafka_bootstrap, topic, demo_records(100, keys=20, seed=42))  # no batch runs: the lag grows
            deadline = time.monotonic() + 30
            while float(prometheus.query(f'elasticity_lag_records{{job="{job}"}}')[0]["value"][1]) != expected.total + 100:
                assert time.monotonic() < deadline, "Prometheus never saw the 100 new records in the lag"
                time.sleep(0.5)

            timings = []
            for _ in range(10):  # what one scrape costs here, Kafka clients held: printed, not asserted
                t0 = time.perf_counter()
                body, _ = scrape.render([job], "text/plain")
                timings.append(time.perf_counter() - t0)
            names = {f.name for f in text_string_to_metric_families(body.decode())}
            assert {"elasticity_lag_records", "elasticity_up", "elasticity_generation"} <= names
            timings.sort()
            print(
                f"\nmeasured: one scrape of one job {timings[len(timings) // 2] * 1000:.1f} ms median of 10 "
                f"(min {timings[0] * 1000:.1f}, max {timings[-1] * 1000:.1f}); {len(body)} bytes"
            )
        finally:
            prometheus.stop()
            server.shutdown()
            scrape.close()


REPORT = """
import sys
from elasticity.airflow.otel_metrics import report_batches
from elasticity.checkpoint.store import CheckpointStore
store = CheckpointStore(sys.argv[1])
print("SENT", report_batches(sys.argv[2], [m for m in store.metrics(sys.argv[2]) if m.get("batch_id") is not None]))
"""


def test_the_batch_s_metrics_reach_an_otlp_receiver_through_airflow_s_otel_metrics(demo_job):
    """Airflow's `[metrics] otel_on` (its environment override), the standard OTLP endpoint variable: the committed
    batch's figures leave through Airflow's own OpenTelemetry logger (its process-wide stats backend) as OTLP
    protobuf over HTTP, and the receiver decodes them."""
    config, store, batch, _, _ = demo_job
    job = config.job_name
    receiver = OtlpReceiver()
    env = {
        **os.environ,
        "AIRFLOW__METRICS__OTEL_ON": "True",
        "AIRFLOW__METRICS__STATSD_ON": "False",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "elasticity-test",
    }
    try:
        out = subprocess.run(
            [sys.executable, "-c", REPORT, config.checkpoint_store_url(), job],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0 and "SENT " in out.stdout, out.stdout[-2000:] + out.stderr[-4000:]
        assert int(out.stdout.split("SENT ")[1].split()[0]) > 0
        lags = receiver.until("airflow.elasticity.lag")
        records = receiver.until("airflow.elasticity.records-read")
        durations = receiver.until("airflow.elasticity.batch-duration")
        fresh = receiver.until("airflow.elasticity.batch-freshness-oldest-ms")
    finally:
        receiver.close()
    # the flush after the report and Airflow's flush at exit each export the cumulative state: the same points again
    stored = store.metrics(job)[-1]
    assert set(receiver.paths) == {"/v1/metrics"}
    assert {(p.kind, tuple(p.attributes.items()), p.value, p.service) for p in lags} == {
        ("gauge", (("job", job),), stored["lag_left"], "elasticity-test")
    }, lags
    assert {(p.kind, p.value) for p in records} == {("sum", batch.records_read)}
    assert {(p.kind, p.count) for p in durations} == {("exponential_histogram", 1)}  # Airflow's timing aggregation
    assert all(math.isclose(p.value, stored["durations_ms"]["total"], rel_tol=1e-9) for p in durations)  # ms, via a timedelta
    assert {p.value for p in fresh} == {batch.freshness_ms["oldest"]}
    print(f"\nmeasured: {len(receiver.points)} OTLP points in {len(receiver.paths)} export requests")


def test_a_broker_down_leaves_the_lag_out_and_the_store_s_figures_in(demo_job, monkeypatch):
    """The brokers do not answer: the scrape still answers within the lag probe's timeout, with
    `lag_probe_success 0`, no lag sample, and what the store knows."""
    from elasticity.kafka.admin import PROBE_TIMEOUT_S
    from elasticity.local.broker import free_port

    config, _, _, _, _ = demo_job
    job = config.job_name
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{free_port()}")  # nothing listens there
    with StorePool() as stores:
        scrape = JobsScrape(stores)
        try:
            t0 = time.perf_counter()
            body, _ = scrape.render([job], "text/plain")
            took = time.perf_counter() - t0
        finally:
            scrape.close()
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(body.decode())
        for s in f.samples
    }
    label = (("job", job),)
    assert got[("elasticity_up", label)] == 1 and got[("elasticity_lag_probe_success", label)] == 0
    assert ("elasticity_lag_records", label) not in got
    assert got[("elasticity_elasticity_factor", label)] == 4 and got[("elasticity_failed_attempts_last_hour", label)] == 1
    print(f"\nmeasured: a scrape with the broker down {took * 1000:.0f} ms (the probe's timeout: {PROBE_TIMEOUT_S} s)")
