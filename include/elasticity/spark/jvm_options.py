"""Options for every JVM this project starts on its own machine: a local driver (a classic session, spark-submit
under Airflow), a Connect server, the local cluster's master, workers and executors.

Spark's own logging at WARN, and the JIT's first tier only (C1). These JVMs plan, schedule and pass Arrow
batches between Kafka and the Python workers, which do the records' work: their own work per batch is small,
while C2 goes on compiling batch after batch. Measured: a Connect server warm, 30,000 records of the stateful
demo, spent 1.0 of its JVM's 2.0 CPU-s in C2's compiler threads and 0.98 CPU-s in all with C1 alone
(bench/cpu_bench.py); a local session's start and two small jobs took 18.0 and 19.0 CPU-s of its JVM with both
tiers, 11.1 and 11.2 with C1 alone.
"""

from __future__ import annotations

from pathlib import Path

LOG4J = Path(__file__).with_name("log4j2.properties")
JIT = "-XX:TieredStopAtLevel=1"


def log4j_options() -> str:
    """JVM options that put Spark's own logging at WARN."""
    return f"-Dlog4j2.configurationFile=file:{LOG4J}"


def jvm_options() -> str:
    """A driver's or a daemon's JVM options: Spark's logging at WARN, the JIT's first tier only."""
    return f"{log4j_options()} {JIT}"
