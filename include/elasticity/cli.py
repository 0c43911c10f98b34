"""`elasticity`: the operator's command line (and what DAGs and spark_apps call)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.migration import MigrationError
from elasticity.checkpoint.store import StoreError, masked
from elasticity.checkpoint.tool import checkpoints_from_tool_json, checkpoints_to_tool_json
from elasticity.config import ConfigError, JobConfig, elasticity_home, load_config
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import JobModel, SystemStream
from elasticity.jobmodel.object_mapper import SerdeError, job_model_to_json
from elasticity.kafka.admin import BrokerUnreachable, TopicError, client_settings, create_topic, partition_counts
from elasticity.local.broker import BrokerError, EmbeddedBroker


def _parse_partitions(items: Sequence[str]) -> dict[SystemStream, int]:
    counts = {}
    for item in items:
        name, sep, n = item.rpartition("=")
        if not sep or not n.isdigit():
            raise ConfigError(f"--partitions {item!r}: expected SYSTEM.STREAM=N")
        counts[SystemStream.parse(name)] = int(n)
    return counts


def _positive(flag: str):
    """An argparse type: an integer >= 1, or an error naming the flag."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: expected an integer >= 1")
        return value

    return parse


def _config(args: argparse.Namespace) -> JobConfig:
    return load_config(args.config, strict=args.strict)


def job_model_table(model: JobModel, inputs: Sequence[SystemStream]) -> str:
    """One line per SSP(Kb) in `task.inputs` order, as SAMZA-71 writes its mappings."""
    owner = {ssp: t.task_name.name for t in model.tasks() for ssp in t.system_stream_partitions}
    order = {ss: i for i, ss in enumerate(inputs)}
    lines = []
    for ssp in sorted(owner, key=lambda s: (order[s.system_stream], s.partition, s.key_bucket)):
        bucket = f" bucket {ssp.key_bucket}" if ssp.has_key_bucket else ""
        lines.append(f"{ssp.stream}:{ssp.partition}{bucket} - {owner[ssp]}")
    return "\n".join(lines)


def _service(action: str, service, start, *, address, started: str) -> int:
    """start | stop | status of an embedded service (the broker, the Spark Connect server): its address on stdout."""
    if action == "start":
        state = start()
        print(address(state))
        print(started.format(state=state), file=sys.stderr)
    elif action == "stop":
        print("stopped" if service.stop() else "not running")
    else:
        state = service.status()
        if state is None:
            print("not running")
            return 3
        print(address(state))
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    broker = EmbeddedBroker()
    return _service(
        args.action,
        broker,
        lambda: broker.start(port=args.port),
        address=lambda s: s.bootstrap,
        started="embedded broker pid {state.pid}, data in {state.data_dir}",
    )


def cmd_topic(args: argparse.Namespace) -> int:
    bootstrap = client_settings(None, role="admin")
    created = create_topic(bootstrap, args.name, args.partitions)
    print(f"{'created' if created else 'exists'}: {args.name} on {bootstrap}")
    return 0


def cmd_job_model(args: argparse.Namespace) -> int:
    config = _config(args)
    start = time.perf_counter_ns()
    if args.partitions:
        counts = _parse_partitions(args.partitions)
    else:
        counts = {}
        for system in sorted({s.system for s in config.inputs}):
            streams = [s for s in config.inputs if s.system == system]
            counts.update(partition_counts(client_settings(config, system, "admin"), streams))
    model = build_job_model(config, counts)
    elapsed_ns = time.perf_counter_ns() - start
    print(job_model_to_json(model) if args.format == "json" else job_model_table(model, config.inputs))
    print(f"job-model-generation-ns={elapsed_ns} task-count={len(model.tasks())}", file=sys.stderr)
    return 0


def cmd_feed(args: argparse.Namespace) -> int:
    from elasticity.apps.demo_feed import demo_records
    from elasticity.kafka.producer import send

    config = _config(args)
    for ss in config.inputs:
        bootstrap = client_settings(config, ss.system, "producer")
        create_topic(client_settings(config, ss.system, "admin"), ss.stream, args.partitions)
        sent = send(bootstrap, ss.stream, demo_records(args.records, args.keys, seed=args.seed))
        print(f"sent {sent} records with {args.keys} keys to {ss} on {bootstrap}")
    return 0


def _coordinator(args: argparse.Namespace) -> JobCoordinator:
    from elasticity.checkpoint.store import CheckpointStore
    from elasticity.kafka.consumer import KafkaInputs

    config = _config(args)
    store = CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size)
    return JobCoordinator(config, store, KafkaInputs(config))


def cmd_checkpoint_tool(args: argparse.Namespace) -> int:
    coordinator = _coordinator(args)
    if args.action in ("import", "export"):
        return _samza_topic(args, coordinator)
    if args.action == "read":
        generation = coordinator.current()
        if generation is None:
            raise StoreError(f"job {coordinator.job!r} has no checkpoints yet in {masked(coordinator.store.url)}")
        print(json.dumps(checkpoints_to_tool_json(coordinator.checkpoints(generation).values()), indent=2))
        print(f"generation {generation.number}, factor {generation.factor}", file=sys.stderr)
    else:
        if not args.file:
            raise ConfigError("checkpoint-tool write needs FILE.json")
        with open(args.file) as f:
            cps = checkpoints_from_tool_json(json.load(f))
        generation = coordinator.replace_checkpoints(cps)
        print(f"wrote {len(cps)} task checkpoints to generation {generation.number} of job {coordinator.job!r}")
    return 0


def _samza_topic(args: argparse.Namespace, coordinator: JobCoordinator) -> int:
    """Hand-over with Samza through its checkpoint topic (`<system>.<topic>`, partition 0)."""
    from elasticity.checkpoint import samza_topic
    from elasticity.kafka.consumer import read_log
    from elasticity.kafka.producer import send

    flag, value = ("--from-kafka", args.from_kafka) if args.action == "import" else ("--to-kafka", args.to_kafka)
    if not value:
        raise ConfigError(f"checkpoint-tool {args.action} needs {flag} SYSTEM.TOPIC (Samza's checkpoint topic)")
    topic = SystemStream.parse(value)
    config = coordinator.config
    if args.action == "import":
        messages = [samza_topic.LogMessage(*m) for m in read_log(client_settings(config, topic.system), topic.stream)]
        found = samza_topic.last_checkpoints(
            messages, config.grouper, config.checkpoint_read_versions, config.live_checkpoint_max_age_ms
        )
        changelogs = config.changelogs()
        imported = [samza_topic.from_samza(t, f.checkpoint, changelogs) for t, f in found.items()]
        plan = coordinator.adopt(imported, str(topic))
        print(samza_topic.describe(found), file=sys.stderr)
        generation = coordinator.current()
        assert generation is not None  # adopt wrote one
        print(
            f"imported {len(found)} task checkpoints from {topic} ({len(messages)} messages): "
            f"generation {generation.number} at factor {plan.factor}"
        )
    else:
        generation = coordinator.current()
        if generation is None:
            raise StoreError(f"job {coordinator.job!r} has no checkpoints yet in {masked(coordinator.store.url)}")
        cps = samza_topic.at_factor_1(
            coordinator.checkpoints(generation).values(), generation.factor, allow_reprocessing=args.allow_reprocessing
        )
        records = samza_topic.to_samza_messages(cps, config.grouper, config.checkpoint_write_versions)
        create_topic(client_settings(config, topic.system, "admin"), topic.stream, 1)  # Samza's has one partition
        send(client_settings(config, topic.system, "producer"), topic.stream, records)
        versions = ",".join(map(str, config.checkpoint_write_versions))
        print(
            f"exported {len(cps)} task checkpoints of generation {generation.number} (factor {generation.factor}) "
            f"to {topic}: {len(records)} messages, versions {versions}, last-processed offsets"
        )
    return 0


def cmd_rescale(args: argparse.Namespace) -> int:
    _project_apps()  # the app's stores move with their keys
    coordinator = _coordinator(args)
    if args.dry_run:
        plan = coordinator.plan_rescale(args.factor)
        if plan.migration is None:
            print(f"job {coordinator.job!r} already runs at factor {plan.factor}; nothing to change")
        else:
            print(plan.migration.describe())
            if plan.state is not None:
                print(plan.state.describe())
            _print_metrics(plan.metrics)
            print("dry run: nothing written")
        return 0
    plan = coordinator.rescale(args.factor, owner=args.owner, abandon_pending=args.abandon_pending)
    if plan.migration is None:
        assert plan.old is not None  # nothing to change: it is the current generation
        print(f"job {coordinator.job!r} already runs at factor {plan.factor} (generation {plan.old.number}); nothing to change")
        return 0
    print(plan.migration.describe())
    if plan.state is not None:
        print(plan.state.describe())
    _print_metrics(plan.metrics)
    generation = coordinator.current()
    assert generation is not None  # the rescale wrote one
    print(f"applied: generation {generation.number} at factor {generation.factor}")
    return 0


def _print_metrics(metrics) -> None:
    print(" ".join(f"{k}={v}" for k, v in metrics.items()), file=sys.stderr)


def _project_apps() -> None:
    """The project's apps (`app.class`) load from its folder, here and in the Spark this process starts."""
    from elasticity.airflow.project import importable

    importable()


def cmd_run_batch(args: argparse.Namespace) -> int:
    from elasticity.batch.coordinator.lag import lag_report
    from elasticity.checkpoint.store import CheckpointStore
    from elasticity.kafka.consumer import KafkaInputs
    from elasticity.metrics.summary import BatchSummary

    config = _config(args)
    _project_apps()
    store = CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size)
    lag = lag_report(config, store, KafkaInputs(config))  # broker and store answer before Spark starts
    if not lag.has_work:
        print(
            BatchSummary(
                job=config.job_name,
                batch_id=None,
                generation=lag.generation,
                factor=lag.factor,
                lag_left=0,
                lag_per_sspkb=lag.per_sspkb,
            ).to_json(),
            flush=True,
        )
        return 0
    from elasticity.spark.engine import BatchFailed, MicroBatchEngine
    from elasticity.spark.session import engine_errors, session

    spark = session(config)
    engine = MicroBatchEngine(config, spark, store)
    try:
        with engine_errors(spark):
            summaries = engine.run(
                args.max_records,
                until_caught_up=args.until_caught_up,
                owner=args.owner,
                max_seconds=args.max_seconds,
                on_commit=lambda s: print(s.to_json(), flush=True),
                reset_sinks=args.reset_sinks,
            )
    except BatchFailed as e:
        print(f"error: batch failed after committing what succeeded: {e}", file=sys.stderr)
        return 1
    for s in summaries:
        if s.batch_id is None:  # the batches were printed as they committed
            print(s.to_json(), flush=True)
    return 0


def cmd_spark(args: argparse.Namespace) -> int:
    from elasticity.local.connect_server import SparkConnectServer
    from elasticity.local.warmup import project_jobs

    server = SparkConnectServer()
    warm_up = None
    if args.action == "start":
        _project_apps()  # its Python workers import the apps by name
        warm_up = None if args.no_warm_up else project_jobs()
    code = _service(
        args.action,
        server,
        lambda: server.start(port=args.port, master=args.master, warm_up=warm_up),
        address=lambda s: s.remote,
        started=f"Spark Connect server pid {{state.pid}} ({args.master}), log {{state.log_file}}"
        + ("" if warm_up is None else "; warming up in the background (`elasticity spark status`)"),
    )
    if args.action == "status" and code == 0:
        warm = server.warm_up_status()
        print(f"warm-up: {warm.line() if warm else 'none'}", file=sys.stderr)
    return code


def cmd_cluster(args: argparse.Namespace) -> int:
    from elasticity.local.cluster import ClusterState, LocalCluster
    from elasticity.local.supervisor import SupervisorStatus, status_file, supervise
    from elasticity.local.warmup import project_jobs

    cluster = LocalCluster()
    if args.action == "stop":
        print("stopped" if cluster.stop() else "not running")
        return 0
    state: ClusterState | None = None
    if args.action == "start":
        state = cluster.start(args.workers, args.cores, args.memory, warm_up=None if args.no_warm_up else project_jobs("cluster"))
        supervise(cluster, args.workers, args.cores, memory=args.memory)  # what dies from now on is started again
    else:
        state = cluster.status()
    if state is None:
        print("not running")
        return 3
    supervisor = cluster.supervisor.status()
    restarts = SupervisorStatus.read(status_file(cluster)) or SupervisorStatus()
    print(f"supervisor  {f'pid {supervisor.pid}, {restarts.line()}' if supervisor else 'not running'}")
    print(f"master      {state.master}")
    for home in state.workers:
        print(f"worker      ELASTICITY_HOME={home}")
    warm = cluster.connect.warm_up_status() if state.connect else None
    print(f"connect     {state.connect or 'not running'}{f' (warm-up: {warm.line()})' if warm else ''}")
    print(f"s3          {state.s3_endpoint or 'not running'}")
    print("# a client of the cluster (the CLI, `make airflow`) exports:")
    for k, v in state.env().items():
        print(f"export {k}={v}")
    print("# and a job runs there with:")
    for k, v in state.job_settings().items():
        print(f"{k}={v}")
    return 0


def cmd_airflow(args: argparse.Namespace) -> int:
    from elasticity.local.standalone import airflow_db, init, on_local_cluster, serve

    db = airflow_db(args.db)
    if args.init_only:
        return init(db)
    _project_apps()  # Airflow's tasks and the Connect server it starts load the project's apps
    spark_remote = on_local_cluster(elasticity_home()) if args.cluster else args.spark_remote
    return serve(elasticity_home(), args.port, db, spark_remote, warm_up=not args.no_warm_up)


def cmd_demo(args: argparse.Namespace) -> int:
    from elasticity.local.story import run_story

    return run_story(args.records)


def cmd_init(args: argparse.Namespace) -> int:
    from elasticity.scaffold import Scaffold, init_project

    written = init_project(args.folder, args.job)
    scaffold = Scaffold(args.job)
    print(f"wrote {len(written)} files to {args.folder}: job {args.job} ({scaffold.config_path}), app {scaffold.module}.py")
    print(f"next: cd {args.folder}, then see README.md (pytest, elasticity broker start, feed, run-batch, airflow)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elasticity", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _init_parser(sub)
    _broker_parser(sub)
    _topic_parser(sub)
    _job_model_parser(sub)
    _feed_parser(sub)
    _checkpoint_tool_parser(sub)
    _rescale_parser(sub)
    _run_batch_parser(sub)
    _spark_parser(sub)
    _cluster_parser(sub)
    _airflow_parser(sub)
    _demo_parser(sub)
    return parser


def _job_options() -> argparse.ArgumentParser:
    """What every command reading a job config takes."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--config", required=True, help="job .properties file")
    options.add_argument("--strict", action="store_true", help="unknown config keys are errors (as job.config.strict=true)")
    return options


def _init_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "init", help="a new project in an empty folder: a job config, its app and test, Airflow's dags/ and plugins/"
    )
    parser.add_argument("folder", help="the project's folder: new or empty")
    parser.add_argument("--job", default="orders", help="the job's name, also its input topic's (default orders)")
    parser.set_defaults(func=cmd_init)


def _broker_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("broker", help="run the embedded Kafka-protocol broker (data under $ELASTICITY_HOME)")
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default 9092)")
    parser.set_defaults(func=cmd_broker)


def _topic_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("topic", help="create a topic on the configured broker")
    parser.add_argument("action", choices=["create"])
    parser.add_argument("name")
    parser.add_argument("--partitions", type=int, default=4)
    parser.set_defaults(func=cmd_topic)


def _job_model_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("job-model", parents=[_job_options()], help="print the JobModel as Samza-style JSON")
    parser.add_argument(
        "--partitions",
        nargs="+",
        action="extend",
        default=[],
        metavar="SYSTEM.STREAM=N",
        help="partition counts, repeatable (default: ask the broker)",
    )
    parser.add_argument(
        "--format", choices=["json", "table"], default="json", help="table: one 'stream:partition - task' line per SSP"
    )
    parser.set_defaults(func=cmd_job_model)


def _feed_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "feed", parents=[_job_options()], help="write demo records (keyed JSON, per-key seq) to the job's inputs"
    )
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4, help="partitions of topics that do not exist yet")
    parser.add_argument("--seed", type=int, default=7)
    parser.set_defaults(func=cmd_feed)


def _checkpoint_tool_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "checkpoint-tool",
        parents=[_job_options()],
        help="read or replace the current generation's checkpoints; import from or export to a Samza checkpoint topic",
    )
    parser.add_argument("action", choices=["read", "write", "import", "export"])
    parser.add_argument("file", nargs="?", help="FILE.json for write, in the format read prints")
    parser.add_argument("--from-kafka", metavar="SYSTEM.TOPIC", help="import: Samza's checkpoint topic to resume from")
    parser.add_argument("--to-kafka", metavar="SYSTEM.TOPIC", help="export: the topic to write Samza checkpoints to")
    parser.add_argument(
        "--allow-reprocessing",
        action="store_true",
        help="export at factor > 1: write each partition at its slowest bucket even when Samza would then process "
        "the faster buckets' records again",
    )
    parser.set_defaults(func=cmd_checkpoint_tool)


def _rescale_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "rescale", parents=[_job_options()], help="change the elasticity factor: migrate checkpoints to a new generation"
    )
    parser.add_argument(
        "--factor", type=int, default=None, help="new factor (default: the current one, picking up new partitions)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the migration, write nothing")
    parser.add_argument("--owner", default=None, help="lease owner id (a retry with the same id may retake its lease)")
    parser.add_argument("--abandon-pending", action="store_true", help="abandon a planned batch that never committed")
    parser.set_defaults(func=cmd_rescale)


def _run_batch_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run-batch", parents=[_job_options()], help="run one micro-batch on Spark (plan, read, route, process, sink, commit)"
    )
    parser.add_argument(
        "--max-records", type=_positive("--max-records"), default=None, help="cap of this batch, >= 1 (default batch.max.records)"
    )
    parser.add_argument("--until-caught-up", action="store_true", help="keep running batches until no lag is left")
    parser.add_argument("--max-seconds", type=float, default=None, help="with --until-caught-up: start no new batch after this")
    parser.add_argument("--owner", default=None, help="lease owner id (default batch@host:pid)")
    parser.add_argument(
        "--reset-sinks",
        action="store_true",
        help="start although the sinks were written under another checkpoint store: move the old outputs aside",
    )
    parser.set_defaults(func=cmd_run_batch)


def _spark_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("spark", help="run the embedded Spark Connect server, the warm engine (state under $ELASTICITY_HOME)")
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default 15002)")
    parser.add_argument("--master", default="local[*]", help="master of the server's driver (default local[*])")
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="start: serve without the background warm-up (a synthetic job, the project's jobs' sessions readied)",
    )
    parser.set_defaults(func=cmd_spark)


def _cluster_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "cluster", help="a Spark standalone master and workers on this machine, with shared S3 storage and a Connect server"
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--workers", type=int, default=2, help="workers, each its own host (work dir, ELASTICITY_HOME)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="memory per worker")
    parser.add_argument(
        "--no-warm-up", action="store_true", help="start: the Connect server serves without the warm-up start waits for"
    )
    parser.set_defaults(func=cmd_cluster)


def _airflow_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "airflow", help="Airflow as users run it on the embedded default (broker, Spark Connect, SQLite), until Ctrl-C"
    )
    parser.add_argument("--port", type=int, default=8080, help="port of the UI and API on 127.0.0.1")
    parser.add_argument(
        "--db",
        default="sqlite",
        help="metadata and checkpoints: sqlite (default), postgres (databases elasticity_airflow and elasticity on "
        "127.0.0.1:5432, created when missing, run by the LocalExecutor) or a server postgresql+psycopg://user@host:port",
    )
    parser.add_argument(
        "--spark-remote", default=None, help="spark_default: this Spark Connect server (sc://host:port, e.g. a cluster's)"
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run the jobs on the local cluster (`elasticity cluster start`): its Connect server, its shared storage, "
        "the job configs of include/jobs/cluster",
    )
    parser.add_argument("--init-only", action="store_true", help="create the databases and migrate Airflow's tables, then exit")
    parser.add_argument(
        "--no-warm-up", action="store_true", help="the embedded Spark Connect server it starts serves without its warm-up"
    )
    parser.set_defaults(func=cmd_airflow)


def _demo_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="the whole story through Airflow: feed, batches, scale up and down, data quality")
    parser.add_argument("--records", type=int, default=6000, help="orders fed before each phase")
    parser.set_defaults(func=cmd_demo)


def _log_to_stderr() -> None:
    """The library's INFO lines (e.g. new input partitions and where they start) belong in a batch's log."""
    logger = logging.getLogger("elasticity")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


# Commands that need an extra of the package (pyproject's optional-dependencies); the others run on the core.
EXTRA_OF = {"run-batch": "spark", "spark": "spark", "cluster": "spark", "airflow": "airflow", "demo": "airflow"}
EXTRA_MODULES = {  # what each extra installs, by top-level module: only their absence is the extra's to fix
    "spark": {"pyspark", "py4j", "grpc", "google"},
    "airflow": {"airflow", "pyspark", "py4j", "grpc", "google", "great_expectations", "pandas", "fastapi", "requests"},
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _log_to_stderr()
    try:
        return args.func(args)
    except (ConfigError, BrokerUnreachable, BrokerError, TopicError, StoreError, MigrationError, SerdeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ConnectionError as e:  # an unreachable Spark master or server: one line, no trace
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        extra = EXTRA_OF.get(args.command)
        if extra is None or (e.name or "elasticity").split(".")[0] not in EXTRA_MODULES[extra]:
            raise
        print(
            f"error: `elasticity {args.command}` needs {e.name}, which is not installed: pip install 'elasticity[{extra}]'",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
