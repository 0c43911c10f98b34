"""Spark's own logging at WARN, for every JVM this project starts: a local driver, a Connect server, a
cluster's master and workers."""

from __future__ import annotations

from pathlib import Path

LOG4J = Path(__file__).with_name("log4j2.properties")


def log4j_options() -> str:
    """JVM options that put Spark's own logging at WARN."""
    return f"-Dlog4j2.configurationFile=file:{LOG4J}"
