"""What the commands share: the job options every job command takes, the argument types, loading the job and its
coordinator, and the project's apps on the path."""

from __future__ import annotations

import argparse
import sys

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.config import JobConfig, load_config


class UsageError(ValueError):
    """Arguments of a command that are wrong together, or in a form argparse does not check: printed as a
    config error is, exit code 2."""


def job_options() -> argparse.ArgumentParser:
    """What every command reading a job config takes."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--config", required=True, help="job .properties file")
    options.add_argument("--strict", action="store_true", help="unknown config keys are errors (as job.config.strict=true)")
    return options


def positive(flag: str):
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


def job_config(args: argparse.Namespace) -> JobConfig:
    return load_config(args.config, strict=args.strict)


def job_coordinator(args: argparse.Namespace) -> JobCoordinator:
    from elasticity.checkpoint.store import CheckpointStore
    from elasticity.kafka.consumer import KafkaInputs

    config = job_config(args)
    store = CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size)
    return JobCoordinator(config, store, KafkaInputs(config))


def project_apps() -> None:
    """The project's apps (`app.class`) load from its folder, here and in the Spark this process starts."""
    from elasticity.airflow.project import importable

    importable()


def print_metrics(metrics) -> None:
    print(" ".join(f"{k}={v}" for k, v in metrics.items()), file=sys.stderr)
