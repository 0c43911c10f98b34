"""Rules on what a job config cannot hold itself: the app's declarations (its stores, tables and Kafka outputs,
known once `app.class` is loaded), the Spark master a run resolves, a rescale's requested factor, and the
deployment's own settings (Airflow's [metrics]). They are checked when those are known, and refused here, as
the keys' parsers and the cross-key rules are, each naming the key, its value and what is expected."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from elasticity.config.errors import ConfigError
from elasticity.config.job import KEYS, JobConfig
from elasticity.config.keys import MAX_ELASTICITY_FACTOR
from elasticity.config.parsers import KAFKA_CHANGELOG_FACTORY, Parser, parse_side_inputs
from elasticity.jobmodel.model import SystemStream

T = TypeVar("T")

EXECUTOR_PATHS = ("job.output.path", "job.audit.path", "job.dead.letter.path")
"""What the executors write: on a cluster, a location each of them reaches."""

_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://.+|yarn|k8s://.+)$")


def deployment_setting(name: str, text: str, parser: Parser[T], *, meaning: str) -> T:
    """A setting the deployment gives outside the job config (an environment variable), parsed as a key is."""
    try:
        return parser(text)
    except ValueError as e:
        raise ConfigError(f"{name}={text!r} ({meaning}): expected {e}") from None


def refuse_schema_changes(problems: Mapping[str, list[str]]) -> None:
    """Typed outputs whose declared schema the files already written could not follow (key -> why, each
    naming the field; elasticity.formats.schemas.incompatibilities), refused before a batch."""
    if problems:
        lines = [f"{key}: {p}" for key, found in sorted(problems.items()) for p in found]
        raise ConfigError("the typed outputs' schemas cannot write beside their files:\n  " + "\n  ".join(lines))


def rescale_factor(factor: int) -> int:
    """A factor asked for (a rescale's, or the config's first one), within the bound the key has."""
    if not 1 <= factor <= MAX_ELASTICITY_FACTOR:
        raise ConfigError(f"job.elasticity.factor={factor!r}: expected an integer from 1 to {MAX_ELASTICITY_FACTOR}")
    return factor


def check_declared_stores(config: JobConfig, declared: set[str]) -> None:
    """Stores need CheckpointV2 (their markers live there), and every `stores.<name>.*` key names one."""
    # markers live in CheckpointV2 only: a V1 read first would restore every store empty
    for key, versions, ok in (
        ("task.checkpoint.read.versions", config.checkpoint_read_versions, config.checkpoint_read_versions[:1] == (2,)),
        ("task.checkpoint.write.versions", config.checkpoint_write_versions, 2 in config.checkpoint_write_versions),
    ):
        if declared and not ok:
            raise ConfigError(
                f"{key}={','.join(map(str, versions))}: the app declares stores {sorted(declared)}, whose state markers "
                f"live in CheckpointV2 only; {'list 2 first' if 'read' in key else 'include 2'} (e.g. 2,1)"
            )
    job_level = {k.name for k in KEYS if k.name.startswith("stores.") and "<" not in k.name}
    for key in config.raw_map:
        parts = key.split(".")
        if (
            parts[0] == "stores" and key not in job_level and parts[1] not in declared and parts[2:4] != ["side", "inputs"]
        ):  # tables: state.table
            raise ConfigError(f"{key}: the app declares no store {parts[1]!r} (it declares {sorted(declared)})")


def check_changelog_backend(name: str, factories: tuple[str, ...], changelog: SystemStream | None) -> None:
    """A store backed up to, or restored from, the Kafka changelog has a changelog topic."""
    if KAFKA_CHANGELOG_FACTORY in factories and changelog is None:
        raise ConfigError(
            f"stores.{name}.changelog is required: store {name!r} uses the Kafka changelog backend; expected system.stream"
        )


def table_side_inputs(config: JobConfig, declared: Mapping[str, Iterable[str]]) -> dict[str, tuple[SystemStream, ...]]:
    """Each declared table's side inputs (`declared`: the app's, as system.stream), `stores.<t>.side.inputs`
    over them; a key naming no table, a table without side inputs, or one also in task.inputs fails naming the key."""
    raw = config.raw_map
    for key in raw:
        parts = key.split(".")
        if parts[0] == "stores" and parts[2:4] == ["side", "inputs"] and parts[1] not in declared:
            raise ConfigError(f"{key}: the app declares no table {parts[1]!r} (it declares {sorted(declared)})")
    out = {}
    for name, side_inputs in sorted(declared.items()):
        key = f"stores.{name}.side.inputs"
        streams = parse_side_inputs(raw[key]) if key in raw else tuple(SystemStream.parse(s) for s in side_inputs)
        if not streams:
            raise ConfigError(f"{key} is required: table {name!r} has no side inputs (system.stream of a compacted topic)")
        both = sorted(str(s) for s in set(streams) & set(config.inputs))
        if both:
            raise ConfigError(
                f"{key}: {', '.join(both)} is also in task.inputs; a side input feeds its table only, list it in one place"
            )
        out[name] = tuple(streams)
    return out


def check_exactly_once_systems(systems: Iterable[str]) -> None:
    """Exactly-once outputs go to one Kafka system: one transaction spans one cluster."""
    if len(found := sorted(set(systems))) > 1:
        raise ConfigError(
            f"processing.guarantee=exactly_once: the app sends to Kafka outputs of systems {found}, and one transaction "
            "spans one Kafka cluster; send to one system, or set processing.guarantee=at_least_once"
        )


def check_master(master: str, source: str) -> str:
    """The master, or a ConfigError naming the source and the value when it cannot work."""
    if not _MASTER.match(master):
        raise ConfigError(
            f"spark master {master!r} from {source} is not a Spark master: expected local[*], local[N], spark://host:port, "
            "yarn or k8s://https://host:port (or a Spark Connect URL sc://host:port as a spark_connect connection / spark.remote)"
        )
    if master == "yarn" and not (os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR")):
        raise ConfigError(
            f"spark master 'yarn' from {source} cannot work here: neither HADOOP_CONF_DIR nor YARN_CONF_DIR is set. "
            "Point the connection at local[*], a spark:// master or a Spark Connect server (`elasticity spark start`)"
        )
    return master


def check_shared_paths(config: JobConfig, master: str, *, blobs: bool) -> None:
    """On a cluster, executors write the sinks (and the blob store): a default under one host's
    ELASTICITY_HOME would split them over hosts, so an unset key stops the job, naming what to set."""
    if master.startswith("local"):
        return
    for key in (*EXECUTOR_PATHS, *(["blob.store.uri"] if blobs else [])):
        if not config.get(key):
            raise ConfigError(
                f"{key} is unset: on the cluster {master} executors write it, and its default lies under one host's "
                "ELASTICITY_HOME; set it to a location every executor reaches (e.g. s3://<bucket>/<job>/..., "
                "as `elasticity cluster status` prints, or a shared mount)"
            )
