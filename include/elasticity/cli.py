"""`elasticity`: the operator's command line (and what DAGs and spark_apps call)."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Sequence

from .config import ConfigError, load_config
from .grouping import build_job_model
from .kafka.admin import BrokerUnreachable, TopicError, create_topic, partition_counts, resolve_bootstrap
from .kafka.broker import BrokerError, EmbeddedBroker
from .model import JobModel, SystemStream
from .serde import job_model_to_json


def _parse_partitions(items: Sequence[str]) -> dict[SystemStream, int]:
    counts = {}
    for item in items:
        name, sep, n = item.rpartition("=")
        if not sep or not n.isdigit():
            raise ConfigError(f"--partitions {item!r}: expected SYSTEM.STREAM=N")
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


def cmd_broker(args: argparse.Namespace) -> int:
    broker = EmbeddedBroker()
    if args.action == "start":
        state = broker.start(port=args.port)
        print(state.bootstrap)
        print(f"embedded broker pid {state.pid}, data in {state.data_dir}", file=sys.stderr)
    elif args.action == "stop":
        print("stopped" if broker.stop() else "not running")
    else:
        state = broker.status()
        if state is None:
            print("not running")
            return 3
        print(state.bootstrap)
    return 0


def cmd_topic(args: argparse.Namespace) -> int:
    bootstrap = resolve_bootstrap()
    created = create_topic(bootstrap, args.name, args.partitions)
    print(f"{'created' if created else 'exists'}: {args.name} on {bootstrap}")
    return 0


def cmd_job_model(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    start = time.perf_counter_ns()
    if args.partitions:
        counts = _parse_partitions(args.partitions)
    else:
        counts = {}
        for system in sorted({s.system for s in config.inputs}):
            streams = [s for s in config.inputs if s.system == system]
            counts.update(partition_counts(resolve_bootstrap(config, system), streams))
    model = build_job_model(config, counts)
    elapsed_ns = time.perf_counter_ns() - start
    print(job_model_to_json(model) if args.format == "json" else job_model_table(model, config.inputs))
    print(f"job-model-generation-ns={elapsed_ns} task-count={len(model.tasks())}", file=sys.stderr)
    return 0


def cmd_feed(args: argparse.Namespace) -> int:
    from .demo import demo_records
    from .kafka.producer import send

    config = load_config(args.config)
    for ss in config.inputs:
        bootstrap = resolve_bootstrap(config, ss.system)
        create_topic(bootstrap, ss.stream, args.partitions)
        sent = send(bootstrap, ss.stream, demo_records(args.records, args.keys, seed=args.seed))
        print(f"sent {sent} records with {args.keys} keys to {ss} on {bootstrap}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="elasticity", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("broker", help="run the embedded Kafka-protocol broker (data under $ELASTICITY_HOME)")
    b.add_argument("action", choices=["start", "stop", "status"])
    b.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default 9092)")
    b.set_defaults(func=cmd_broker)

    t = sub.add_parser("topic", help="create a topic on the configured broker")
    t.add_argument("action", choices=["create"])
    t.add_argument("name")
    t.add_argument("--partitions", type=int, default=4)
    t.set_defaults(func=cmd_topic)

    j = sub.add_parser("job-model", help="print the JobModel as Samza-style JSON")
    j.add_argument("--config", required=True, help="job .properties file")
    j.add_argument("--partitions", nargs="*", default=[], metavar="SYSTEM.STREAM=N", help="partition counts (default: ask the broker)")
    j.add_argument("--format", choices=["json", "table"], default="json", help="table: one 'stream:partition - task' line per SSP")
    j.set_defaults(func=cmd_job_model)

    f = sub.add_parser("feed", help="write demo records (keyed JSON, per-key seq) to the job's inputs")
    f.add_argument("--config", required=True)
    f.add_argument("--records", type=int, default=10_000)
    f.add_argument("--keys", type=int, default=200)
    f.add_argument("--partitions", type=int, default=4, help="partitions of topics that do not exist yet")
    f.add_argument("--seed", type=int, default=7)
    f.set_defaults(func=cmd_feed)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warnings.simplefilter("default")
    try:
        return args.func(args)
    except (ConfigError, BrokerUnreachable, BrokerError, TopicError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
