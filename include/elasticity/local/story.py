"""`make demo`: the whole story through Airflow as users run it, on the embedded
default. The embedded broker and the warm Spark Connect server, `airflow
standalone` (its scheduler runs the DAGs), runs triggered through Airflow's REST
API as the UI's Trigger button does: micro-batches at factor 2, a scale-up to 8,
a scale-down to 3, the data-quality runs that follow. It prints the story and its
figures; the details (Airflow's own output) go to the files it names."""

from __future__ import annotations

import json
import os
import time

from elasticity.apps.demo_feed import demo_records
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.store.attempt_token import AttemptToken
from elasticity.config import elasticity_home, load_config
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send
from elasticity.local.connect_server import SparkConnectServer
from elasticity.local.daemon import free_port, port_open
from elasticity.local.standalone import AirflowStandalone, demo_config_file, embedded_services

JOB = "demo"
USERS = 3000  # with a few hundred, the busiest of 32 virtual tasks holds so many that factor 8 gains little over 2


def _say(text: str) -> None:
    print(text, flush=True)


def run_story(records: int = 6000) -> int:
    config = load_config(demo_config_file())
    home = elasticity_home()
    os.environ.setdefault("ELASTICITY_HOME", str(home))  # the services and Airflow's tasks share it
    _say(f"elasticity demo: job {JOB!r} through Airflow's scheduler (state in {home})")
    conns = embedded_services(home)
    kafka = json.loads(conns["AIRFLOW_CONN_KAFKA_DEFAULT"])
    bootstrap = f"{kafka['host']}:{kafka['port']}"
    spark = json.loads(conns["AIRFLOW_CONN_SPARK_DEFAULT"])
    _say(f"1. embedded Kafka-protocol broker at {bootstrap}; warm Spark Connect server at {spark['host']}:{spark['port']}")
    topic = config.inputs[0].stream
    create_topic(bootstrap, topic, 4)
    store = CheckpointStore(json.loads(conns["AIRFLOW_CONN_ELASTICITY_STORE"])["extra"]["url"])

    port = 8080 if not port_open(8080) else free_port()
    airflow = AirflowStandalone(home / "airflow", port, {**conns})
    _say(
        f"2. Airflow standalone (api-server, scheduler, dag-processor, triggerer) on {airflow.base}; its log: {airflow.log_file}"
    )
    airflow.start()
    try:
        airflow.wait_ready()
        api = airflow.api()
        api.wait_dag(f"elastic_microbatch__{JOB}")
        warm = SparkConnectServer(home).wait_warm()  # its batches would share the cores the rates measure
        _say(f"   the Spark Connect server's warm-up: {warm.line() if warm else 'none (a server started before)'}")
        seeds = iter(range(1000, 10_000))
        step = iter(range(3, 100))
        rates: dict[int | None, float] = {}  # by factor (None: no batch ran)
        evenness: dict[int | None, float] = {}  # by factor: orders per order of each batch's busiest virtual task

        def feed(n: int) -> None:
            sent = send(bootstrap, topic, demo_records(n, keys=USERS, seed=next(seeds), hot_key_share=0))
            _say(f"{next(step)}. fed {sent:,} orders of {USERS:,} users to {topic} (every 50th without a key)")

        def batches() -> None:
            before = max((m["batch_id"] for m in store.metrics(JOB, limit=1)), default=0)
            run_id = api.trigger(f"elastic_microbatch__{JOB}")
            api.wait_run(f"elastic_microbatch__{JOB}", run_id, 1800)
            api.wait_idle(f"elastic_microbatch__{JOB}")  # a run the lag watcher started may have taken part of the work
            done = [m for m in store.metrics(JOB, limit=500) if m["batch_id"] > before]
            runs = sorted({AttemptToken.parse(m["owner"]).run for m in done})  # each try owns as <run>#<try>#<hex>
            task_s = sum(ti["duration"] or 0 for r in runs for ti in api.task_instances(f"elastic_microbatch__{JOB}", r))
            read = sum(m["records_read"] for m in done)
            factor = done[-1]["factor"] if done else None
            rates[factor] = read / task_s if task_s else 0.0
            evenness[factor] = read / max(1, sum(max(m["metrics"]["records"].values(), default=0) for m in done))
            _say(
                f"{next(step)}. elastic_microbatch__{JOB}: {len(runs)} run(s), {len(done)} batches at factor {factor} "
                f"({done[-1]['task_count'] if done else 0} virtual tasks): {read:,} orders read, "
                f"{sum(m['processed'] for m in done):,} processed, {sum(m['dead_lettered'] for m in done)} dead letters, "
                f"lag left {done[-1]['lag_left'] if done else 0}; {task_s:.1f} s of task time = {rates[factor]:,.0f} orders/s"
            )

        def rescale(factor: int) -> None:
            run_id = api.trigger("elastic_rescale", {"job": JOB, "factor": factor, "dry_run": False})
            state = api.wait_run("elastic_rescale", run_id, 600)["state"]
            g = store.generation(JOB)
            assert g is not None  # the job has run
            _say(
                f"{next(step)}. elastic_rescale to {factor} (as the Trigger form does): {state}, generation {g.number} at factor "
                f"{g.factor}, {len(g.job_model.tasks())} virtual tasks; a data-quality run follows"
            )

        current = store.generation(JOB)
        if current is not None and current.factor != config.elasticity_factor:
            rescale(config.elasticity_factor)  # a second demo starts where the first began
        feed(records // 10)
        batches()
        _say("   (a run's fixed cost weighs on the rate of 600 orders; the server's warm-up readied the job's session)")
        feed(records)
        batches()
        rescale(8)
        feed(records)
        batches()
        rescale(3)
        feed(records // 2)
        batches()
        if 2 in rates and 8 in rates and rates[2]:
            _say(
                f"   factor 8 over factor 2: {rates[8] / rates[2]:.1f}x the orders per second of task time (the limit: 4x "
                f"the virtual tasks; {evenness[8] / evenness[2]:.1f}x with these users, as each batch waits for its busiest "
                "virtual task, whose orders stay in order)"
            )
        _wait_validated(api, store, config)
        return _quality(api, config, step, airflow)
    finally:
        airflow.stop()


def _wait_validated(api, store: CheckpointStore, config, timeout_s: float = 900) -> None:
    """Until data quality has validated the last committed batch (its run follows the batches' Asset event), or a run failed."""
    last = max((m["batch_id"] for m in store.metrics(JOB, limit=1)), default=0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if store.validated_batch(JOB) >= last:
            break
        if [r for r in api.runs(f"elastic_data_quality__{JOB}") if r["state"] == "failed"]:
            break
        time.sleep(2)
    api.wait_idle(f"elastic_data_quality__{JOB}")


def _quality(api, config, step, airflow: AirflowStandalone) -> int:
    from elasticity.quality.report_files import ReportFiles, public

    reports = ReportFiles(config.report_location)
    runs = [r for r in api.runs(f"elastic_data_quality__{JOB}") if r["state"] in ("success", "failed")]
    failed = [r for r in runs if r["state"] == "failed"]
    folders = reports.folder_ages("runs")
    docs = sorted(
        (json.loads(reports.read_text(f"runs/{f}/summary.json")) for f in folders if reports.exists(f"runs/{f}/summary.json")),
        key=lambda d: d["finished_ms"],
    )
    validated = sum(next(c["rows"] for c in d["checks"] if c["name"] == "no_loss") for d in docs if d["success"])
    _say(
        f"{next(step)}. elastic_data_quality__{JOB}: {len(runs)} runs (after each committed run and each rescale), "
        f"{len(failed)} failed; together they validated {validated:,} orders, each run only the batches committed since the last"
    )
    if docs:
        last = docs[-1]
        for c in last["checks"]:
            _say(
                f"   {'PASS' if c['success'] else 'FAIL'} {c['name']:13s} {c['rows']:>6,} rows, {c['unexpected']} unexpected: {c['describe']}"
            )
        _say(
            f"   (the last run, {last['window']}; rows are the window's records, and key_order also counts each key's "
            "last validated record before the window; routing counts keys per generation)"
        )
    _say(f"Report: {public(reports.child('summary.html').location)} (the latest runs, with Great Expectations Data Docs per run)")
    _say(f"The UI over these runs: `make airflow`, then {airflow.base} (login admin, password {airflow.password()})")
    return 1 if failed or not docs else 0
