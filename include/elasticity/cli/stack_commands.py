"""The local stack's commands: the embedded broker and Spark Connect server, the local cluster, Airflow on them,
and the demo. A production job needs none of them."""

from __future__ import annotations

import argparse
import sys

from elasticity.cli.options import positive, project_apps
from elasticity.config import elasticity_home
from elasticity.local.broker import EmbeddedBroker


def register(sub: argparse._SubParsersAction) -> None:
    for add in (_broker_parser, _spark_parser, _cluster_parser, _airflow_parser, _demo_parser):
        add(sub)


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


def _broker_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("broker", help="run the embedded Kafka-protocol broker (data under $ELASTICITY_HOME)")
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default 9092)")
    parser.set_defaults(func=cmd_broker)


def cmd_broker(args: argparse.Namespace) -> int:
    broker = EmbeddedBroker()
    return _service(
        args.action,
        broker,
        lambda: broker.start(port=args.port),
        address=lambda s: s.bootstrap,
        started="embedded broker pid {state.pid}, data in {state.data_dir}",
    )


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


def cmd_spark(args: argparse.Namespace) -> int:
    from elasticity.local.connect_server import SparkConnectServer
    from elasticity.local.warmup import project_jobs

    server = SparkConnectServer()
    warm_up = None
    if args.action == "start":
        project_apps()  # its Python workers import the apps by name
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
    parser.add_argument(
        "--executor",
        choices=["local", "celery"],
        default="local",
        help="local (default: `airflow standalone`, the LocalExecutor) or celery: the CeleryExecutor, the API server, "
        "scheduler, dag-processor and triggerer, and --workers Celery workers each on a host of its own (a network "
        "namespace: needs root); needs --db postgres",
    )
    parser.add_argument(
        "--workers", type=positive("--workers"), default=2, help="--executor celery: the Celery workers (default 2)"
    )
    parser.add_argument(
        "--redis",
        default=None,
        help="--executor celery: Celery's broker, a redis:// URL or `own` (a redis-server of its own on a free port); "
        "default: the Redis on 127.0.0.1:6379 when it answers, else its own",
    )
    parser.set_defaults(func=cmd_airflow)


def cmd_airflow(args: argparse.Namespace) -> int:
    from elasticity.local.standalone import airflow_db, init, on_local_cluster, serve

    db = airflow_db(args.db)
    if args.init_only:
        return init(db)
    project_apps()  # Airflow's tasks and the Connect server it starts load the project's apps
    spark_remote = on_local_cluster(elasticity_home()) if args.cluster else args.spark_remote
    if args.executor == "celery":
        from elasticity.local.celery_topology import serve_celery

        return serve_celery(
            elasticity_home(), args.port, db, spark_remote, workers=args.workers, redis=args.redis, warm_up=not args.no_warm_up
        )
    return serve(elasticity_home(), args.port, db, spark_remote, warm_up=not args.no_warm_up)


def _demo_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="the whole story through Airflow: feed, batches, scale up and down, data quality")
    parser.add_argument("--records", type=int, default=6000, help="orders fed before each phase")
    parser.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from elasticity.local.story import run_story

    return run_story(args.records)
