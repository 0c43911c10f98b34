"""`elasticity`: the operator's command line (and what DAGs and spark_apps call)."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from collections.abc import Sequence

from elasticity.checkpoint.migration import MigrationError
from elasticity.checkpoint.store import StoreError
from elasticity.cli import checkpoint_commands, job_commands, stack_commands
from elasticity.config import ConfigError
from elasticity.jobmodel.object_mapper import SerdeError
from elasticity.kafka.admin import BrokerUnreachable, TopicError
from elasticity.local.broker import BrokerError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elasticity", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (job_commands, checkpoint_commands, stack_commands):
        commands.register(sub)
    return parser


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


FIRST_MODULE = {"spark": "pyspark", "airflow": "airflow"}  # the module each extra's commands import first

EXTRA_MODULES = {  # what each extra installs, by top-level module: only their absence is the extra's to fix
    "spark": {"pyspark", "py4j", "grpc", "google"},
    "airflow": {"airflow", "pyspark", "py4j", "grpc", "google", "great_expectations", "pandas", "fastapi", "requests"},
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _log_to_stderr()
    try:
        extra = EXTRA_OF.get(args.command)
        if extra is not None and importlib.util.find_spec(needed := FIRST_MODULE[extra]) is None:
            # before the command's own checks (a project folder, a config): installing the extra comes first
            raise ModuleNotFoundError(f"No module named {needed!r}", name=needed)
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
