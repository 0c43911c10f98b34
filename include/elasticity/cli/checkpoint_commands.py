"""`elasticity checkpoint-tool`: the current generation's checkpoints read and replaced, and the hand-over with Samza
through its checkpoint topic."""

from __future__ import annotations

import argparse
import json
import sys

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import StoreError, masked
from elasticity.checkpoint.tool import checkpoints_from_tool_json, checkpoints_to_tool_json
from elasticity.cli.options import UsageError, job_coordinator, job_options
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.admin import client_settings, create_topic


def register(sub: argparse._SubParsersAction) -> None:
    _checkpoint_tool_parser(sub)


def _checkpoint_tool_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "checkpoint-tool",
        parents=[job_options()],
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


def cmd_checkpoint_tool(args: argparse.Namespace) -> int:
    coordinator = job_coordinator(args)
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
            raise UsageError("checkpoint-tool write needs FILE.json")
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
        raise UsageError(f"checkpoint-tool {args.action} needs {flag} SYSTEM.TOPIC (Samza's checkpoint topic)")
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
