"""The job's commands: a new project, topics, the JobModel, demo records, a rescale, a replay and a micro-batch."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from elasticity.cli.options import UsageError, job_config, job_coordinator, job_options, positive, print_metrics, project_apps
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import JobModel, SystemStream
from elasticity.jobmodel.object_mapper import job_model_to_json
from elasticity.kafka.admin import client_settings, create_topic, partition_counts


def register(sub: argparse._SubParsersAction) -> None:
    for add in (_init_parser, _topic_parser, _job_model_parser, _feed_parser, _rescale_parser, _replay_parser, _run_batch_parser):
        add(sub)


def _init_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "init", help="a new project in an empty folder: a job config, its app and test, Airflow's dags/ and plugins/"
    )
    parser.add_argument("folder", help="the project's folder: new or empty")
    parser.add_argument("--job", default="orders", help="the job's name, also its input topic's (default orders)")
    parser.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from elasticity.scaffold import Scaffold, init_project

    written = init_project(args.folder, args.job)
    scaffold = Scaffold(args.job)
    print(f"wrote {len(written)} files to {args.folder}: job {args.job} ({scaffold.config_path}), app {scaffold.module}.py")
    print(f"next: cd {args.folder}, then see README.md (pytest, elasticity broker start, feed, run-batch, airflow)")
    return 0


def _topic_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("topic", help="create a topic on the configured broker")
    parser.add_argument("action", choices=["create"])
    parser.add_argument("name")
    parser.add_argument("--partitions", type=int, default=4)
    parser.set_defaults(func=cmd_topic)


def cmd_topic(args: argparse.Namespace) -> int:
    bootstrap = client_settings(None, role="admin")
    created = create_topic(bootstrap, args.name, args.partitions)
    print(f"{'created' if created else 'exists'}: {args.name} on {bootstrap}")
    return 0


def _job_model_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("job-model", parents=[job_options()], help="print the JobModel as Samza-style JSON")
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


def cmd_job_model(args: argparse.Namespace) -> int:
    config = job_config(args)
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


def _parse_partitions(items: Sequence[str]) -> dict[SystemStream, int]:
    counts = {}
    for item in items:
        name, sep, n = item.rpartition("=")
        if not sep or not n.isdigit():
            raise UsageError(f"--partitions {item!r}: expected SYSTEM.STREAM=N")
        counts[SystemStream.parse(name)] = int(n)
    return counts


def job_model_table(model: JobModel, inputs: Sequence[SystemStream]) -> str:
    """One line per SSP(Kb) in `task.inputs` order, as SAMZA-71 writes its mappings."""
    owner = {ssp: t.task_name.name for t in model.tasks() for ssp in t.system_stream_partitions}
    order = {ss: i for i, ss in enumerate(inputs)}
    lines = []
    for ssp in sorted(owner, key=lambda s: (order[s.system_stream], s.partition, s.key_bucket)):
        bucket = f" bucket {ssp.key_bucket}" if ssp.has_key_bucket else ""
        lines.append(f"{ssp.stream}:{ssp.partition}{bucket} - {owner[ssp]}")
    return "\n".join(lines)


def _feed_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "feed", parents=[job_options()], help="write demo records (keyed JSON, per-key seq) to the job's inputs"
    )
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4, help="partitions of topics that do not exist yet")
    parser.add_argument("--seed", type=int, default=7)
    parser.set_defaults(func=cmd_feed)


def cmd_feed(args: argparse.Namespace) -> int:
    from elasticity.apps.demo_feed import demo_records
    from elasticity.kafka.producer import send

    config = job_config(args)
    for ss in config.inputs:
        bootstrap = client_settings(config, ss.system, "producer")
        create_topic(client_settings(config, ss.system, "admin"), ss.stream, args.partitions)
        sent = send(bootstrap, ss.stream, demo_records(args.records, args.keys, seed=args.seed))
        print(f"sent {sent} records with {args.keys} keys to {ss} on {bootstrap}")
    return 0


def _rescale_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "rescale", parents=[job_options()], help="change the elasticity factor: migrate checkpoints to a new generation"
    )
    parser.add_argument(
        "--factor", type=int, default=None, help="new factor (default: the current one, picking up new partitions)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the migration, write nothing")
    parser.add_argument("--owner", default=None, help="lease owner id, this attempt's own (default host:pid#<8 random hex>)")
    parser.add_argument("--abandon-pending", action="store_true", help="abandon a planned batch that never committed")
    parser.set_defaults(func=cmd_rescale)


def cmd_rescale(args: argparse.Namespace) -> int:
    project_apps()  # the app's stores move with their keys
    coordinator = job_coordinator(args)
    if args.dry_run:
        plan = coordinator.plan_rescale(args.factor)
        if plan.migration is None:
            print(f"job {coordinator.job!r} already runs at factor {plan.factor}; nothing to change")
        else:
            print(plan.migration.describe())
            if plan.state is not None:
                print(plan.state.describe())
            print_metrics(plan.metrics)
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
    print_metrics(plan.metrics)
    generation = coordinator.current()
    assert generation is not None  # the rescale wrote one
    print(f"applied: generation {generation.number} at factor {generation.factor}")
    return 0


def _replay_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "replay",
        parents=[job_options()],
        help="reprocess the input from a time or the earliest offset: a new generation, the stores rebuilt",
    )
    start = parser.add_mutually_exclusive_group(required=True)
    start.add_argument(
        "--from-timestamp",
        metavar="T",
        help="record time to start from: ISO 8601 (2026-11-29T04:00:00Z; UTC unless it names its offset) or epoch ms",
    )
    start.add_argument("--from-earliest", action="store_true", help="start from each input partition's earliest retained offset")
    parser.add_argument(
        "--outputs",
        choices=["new-version", "replace"],
        default="new-version",
        help="the replayed range's Parquet outputs: a new version beside the old (default), or replacing it",
    )
    parser.add_argument("--reason", default="", help="why, kept with the generation and shown on the job page")
    parser.add_argument("--dry-run", action="store_true", help="print where each partition would start, write nothing")
    parser.add_argument("--owner", default=None, help="lease owner id, this attempt's own (default host:pid#<8 random hex>)")
    parser.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from elasticity.batch.coordinator.replayer import plan_replay, replay
    from elasticity.checkpoint.replay import OutputMode, ReplayFrom

    project_apps()  # the app's stores are cleared
    frm = ReplayFrom(timestamp_ms=None) if args.from_earliest else ReplayFrom.parse(args.from_timestamp)
    outputs = OutputMode(args.outputs)
    coordinator = job_coordinator(args)
    if args.dry_run:
        print(plan_replay(coordinator, frm, outputs).describe())
        print("dry run: nothing written")
        return 0
    plan = replay(coordinator, frm, outputs=outputs, reason=args.reason or "elasticity replay", owner=args.owner)
    print(plan.describe())
    print_metrics(plan.metrics)
    assert plan.new is not None  # the replay wrote one
    print(f"applied: generation {plan.new.number} at factor {plan.new.factor}, origin replay")
    return 0


def _run_batch_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run-batch", parents=[job_options()], help="run one micro-batch on Spark (plan, read, route, process, sink, commit)"
    )
    parser.add_argument(
        "--max-records", type=positive("--max-records"), default=None, help="cap of this batch, >= 1 (default batch.max.records)"
    )
    parser.add_argument("--until-caught-up", action="store_true", help="keep running batches until no lag is left")
    parser.add_argument("--max-seconds", type=float, default=None, help="with --until-caught-up: start no new batch after this")
    parser.add_argument(
        "--owner", default=None, help="lease owner id, this attempt's own (default batch@host:pid#<8 random hex>)"
    )
    parser.add_argument(
        "--reset-sinks",
        action="store_true",
        help="start although the sinks were written under another checkpoint store: move the old outputs aside",
    )
    parser.set_defaults(func=cmd_run_batch)


def cmd_run_batch(args: argparse.Namespace) -> int:
    from elasticity.batch.coordinator.lag import lag_report
    from elasticity.checkpoint.store import CheckpointStore
    from elasticity.kafka.consumer import KafkaInputs
    from elasticity.metrics.summary import BatchSummary

    config = job_config(args)
    project_apps()
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
    from elasticity.kafka.transactions import OutputRefused
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
    except OutputRefused as e:  # exactly-once under task.dead.letter.policy=fail: the batch's transaction aborted
        print(f"error: {e}", file=sys.stderr)
        return 1
    for s in summaries:
        if s.batch_id is None:  # the batches were printed as they committed
            print(s.to_json(), flush=True)
    return 0
