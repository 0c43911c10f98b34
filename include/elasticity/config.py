"""Job configuration: flat Samza-style `.properties`, validated in this one place.

Every key the product reads is declared in `KEYS` with its type, default and what
is allowed; a bad value fails at load naming the key, the value and the allowed
values. An unknown key is warned about with the nearest known key ("did you
mean"), and is an error in strict mode (`job.config.strict=true`, or `--strict`
on the command line): a typo must not pass silently.
"""

from __future__ import annotations

import difflib
import os
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from elasticity.jobmodel.grouping import GROUPER_NAMES, Grouper, PartitionScheme
from elasticity.jobmodel.model import SystemStream

MAX_ELASTICITY_FACTOR = 256
"""Upper bound of `job.elasticity.factor`.

Each virtual task costs a checkpoint row per commit and a Spark task per batch;
beyond 256 slices of one partition that overhead outweighs any gain in
parallelism, and a mistyped factor (say 4096) would flood the checkpoint store.
"""


class ConfigError(ValueError):
    """A configuration problem; the message names the key, the value and what is allowed."""


class ConfigWarning(UserWarning):
    pass


# --- value parsers: each returns the typed value or raises ValueError(allowed) ---


def _int_range(lo: int, hi: int | None = None) -> Callable[[str], int]:
    allowed = f"an integer >= {lo}" if hi is None else f"an integer from {lo} to {hi}"

    def parse(text: str) -> int:
        try:
            v = int(text.strip())
        except ValueError:
            raise ValueError(allowed) from None
        if v < lo or (hi is not None and v > hi):
            raise ValueError(allowed)
        return v

    parse.allowed = allowed  # type: ignore[attr-defined]
    return parse


def _choice(names: Mapping[str, Any]) -> Callable[[str], Any]:
    allowed = "one of " + ", ".join(sorted(names, key=lambda n: (len(n), n)))

    def parse(text: str) -> Any:
        try:
            return names[text.strip()]
        except KeyError:
            raise ValueError(allowed) from None

    parse.allowed = allowed  # type: ignore[attr-defined]
    return parse


def _nonempty(text: str) -> str:
    if not text.strip():
        raise ValueError("a non-empty string")
    return text.strip()


_nonempty.allowed = "a non-empty string"  # type: ignore[attr-defined]


def _input_list(text: str) -> tuple[str, ...]:
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    if not items:
        raise ValueError("a comma-separated list of system.stream (or stream with job.default.system)")
    return items


_input_list.allowed = "a comma-separated list of system.stream"  # type: ignore[attr-defined]


def _offset_default(text: str) -> str:
    """Samza's names; Kafka's `auto.offset.reset` names get a pointer to them."""
    allowed = "one of oldest, upcoming"
    value = text.strip()
    if value in ("oldest", "upcoming"):
        return value
    hint = {"earliest": "oldest", "smallest": "oldest", "latest": "upcoming", "largest": "upcoming"}.get(value.lower())
    raise ValueError(f"{allowed} (Kafka's {value!r} is Samza's {hint!r})" if hint else allowed)


_offset_default.allowed = "one of oldest, upcoming"  # type: ignore[attr-defined]


def _callback_timeout(text: str) -> int | None:
    """Samza's -1 (its default) means no timeout; None here."""
    allowed = "-1 (no timeout) or an integer >= 1 (ms)"
    try:
        v = int(text.strip())
    except ValueError:
        raise ValueError(allowed) from None
    if v == -1:
        return None
    if v < 1:
        raise ValueError(allowed)
    return v


_callback_timeout.allowed = "-1 (no timeout) or an integer >= 1 (ms)"  # type: ignore[attr-defined]

STORE_BACKENDS = ("sqlite", "postgresql")


def store_url(text: str) -> str:
    """A SQLAlchemy URL of a backend the store runs on (`sqlite:///...`, `postgresql+psycopg://...`)."""
    allowed = "a SQLAlchemy URL such as sqlite:///path/checkpoints.db or postgresql+psycopg://user@host:5432/db"
    try:
        url = make_url(text.strip())
    except ArgumentError:
        raise ValueError(allowed) from None
    if url.get_backend_name() not in STORE_BACKENDS:
        raise ValueError(f"{allowed} (backend {url.get_backend_name()!r} is not one of {', '.join(STORE_BACKENDS)})")
    return text.strip()


store_url.allowed = "a SQLAlchemy URL (sqlite:///..., postgresql+psycopg://...)"  # type: ignore[attr-defined]


def _versions(text: str) -> tuple[int, ...]:
    allowed = "a comma-separated list of checkpoint versions 1 and 2, each once (e.g. 1,2)"
    try:
        versions = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(allowed) from None
    if not versions or len(set(versions)) != len(versions) or not set(versions) <= {1, 2}:
        raise ValueError(allowed)
    return versions


_versions.allowed = "a comma-separated list of checkpoint versions 1 and 2"  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Key:
    name: str  # `<x>` marks a name part, e.g. systems.<system>.consumer.bootstrap.servers
    parse: Callable[[str], Any]
    default: Any
    doc: str
    required: bool = False

    @property
    def allowed(self) -> str:
        return getattr(self.parse, "allowed", "")

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile("^" + re.sub(r"<[a-z]+>", "[^.]+", re.escape(self.name)) + "$")


# --- state: stores, backup/restore backends, commit and restore pools (read by elasticity.state.store_config) ---

KAFKA_CHANGELOG_FACTORY = "org.apache.samza.storage.KafkaChangelogStateBackendFactory"
BLOB_STORE_FACTORY = "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory"
STATE_BACKEND_FACTORIES = {
    KAFKA_CHANGELOG_FACTORY: KAFKA_CHANGELOG_FACTORY,
    "KafkaChangelogStateBackendFactory": KAFKA_CHANGELOG_FACTORY,
    "kafka": KAFKA_CHANGELOG_FACTORY,
    BLOB_STORE_FACTORY: BLOB_STORE_FACTORY,
    "BlobStoreStateBackendFactory": BLOB_STORE_FACTORY,
    "blobstore": BLOB_STORE_FACTORY,
}


def parse_factories(text: str) -> tuple[str, ...]:
    """Backend factories (Samza class names or short names), each once, as class names; empty = none."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    found = tuple(STATE_BACKEND_FACTORIES.get(n, "") for n in names)
    if "" in found or len(set(found)) != len(found):
        raise ValueError(parse_factories.allowed)  # type: ignore[attr-defined]
    return found


parse_factories.allowed = "a comma-separated list, each once, of " + ", ".join(sorted(STATE_BACKEND_FACTORIES, key=len))  # type: ignore[attr-defined]


def _deprecated_factory(text: str) -> tuple[str, ...]:
    warnings.warn("stores.<store>.restore.factory is deprecated: use stores.<store>.restore.factories", ConfigWarning, stacklevel=4)
    return parse_factories(text)


_deprecated_factory.allowed = parse_factories.allowed  # type: ignore[attr-defined]


def _system_stream(text: str) -> SystemStream:
    try:
        return SystemStream.parse(text)
    except ValueError:
        raise ValueError("system.stream, e.g. kafka.my-job-counts-changelog") from None


_system_stream.allowed = "system.stream"  # type: ignore[attr-defined]


def parse_side_inputs(text: str) -> tuple[SystemStream, ...]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise ValueError(parse_side_inputs.allowed)  # type: ignore[attr-defined]
    return tuple(_system_stream(s) for s in items)


parse_side_inputs.allowed = "a comma-separated list of system.stream (compacted topics)"  # type: ignore[attr-defined]


def _factory(text: str) -> str:
    module, sep, attr = text.strip().partition(":")
    if not sep or not module or not attr:
        raise ValueError(_factory.allowed)  # type: ignore[attr-defined]
    return text.strip()


_factory.allowed = "module:factory, e.g. my_app.tables:users_processor"  # type: ignore[attr-defined]

STATE_KEYS: tuple[Key, ...] = (
    Key("stores.<store>.backup.factories", parse_factories, None, "Backup backends of a store (overrides stores.backup.factories); a commit writes every one's marker into CheckpointV2 (dual commit)."),
    Key("stores.backup.factories", parse_factories, None, "Backup backends of every store without its own list (default: the Kafka changelog when the store has one)."),
    Key("stores.<store>.restore.factories", parse_factories, None, "Restore backends of a store in priority order: the first with a marker for the store wins."),
    Key("stores.<store>.restore.factory", _deprecated_factory, None, "Deprecated singular of stores.<store>.restore.factories (accepted with a warning)."),
    Key("stores.restore.factories", parse_factories, None, "Restore backends of every store without its own list (default: the store's backup factories)."),
    Key("stores.<store>.changelog", _system_stream, None, "Compacted Kafka topic backing a store, system.stream (created when missing)."),
    Key("stores.<store>.side.inputs", parse_side_inputs, None, "Compacted topics (system.stream, comma-separated) that feed table <store>, read whole into every container (replicated); overrides the app's TableDescriptor."),
    Key("stores.<store>.side.inputs.processor.factory", _factory, None, "module:factory, a function of no arguments returning processor(message) -> [(key, value), ...] for table <store> (Samza's SideInputsProcessor); default: the record's key and value."),
    Key("stores.<store>.blob.retain", _int_range(1, 1000), 2, "Blob-store snapshots kept per virtual task and store; older ones are deleted after a commit."),
    Key("blob.store.uri", _nonempty, None, "Where blob-store snapshots go: a folder or a pyarrow/fsspec URI such as s3://bucket/prefix (default $ELASTICITY_HOME/<job>/blobs)."),
    Key("task.transactional.state.checkpoint.enabled", _choice({"true": True, "false": False}), True, "true: a restore yields exactly the last checkpoint's state; false: Samza's non-transactional state (local store reused as it is, changelog replayed to its end)."),
    Key("job.state.dir", _nonempty, None, "Folder of the local RocksDB stores, one per virtual task and store (default $ELASTICITY_HOME/<job>/state)."),
    Key("job.container.commit.thread.pool.size", _int_range(1, 64), None, "Threads uploading a container's state snapshots (default: one per virtual task, at most 64)."),
    Key("job.container.restore.thread.pool.size", _int_range(1, 64), 2, "Threads restoring a container's stores."),
)

# --- metrics reporters (read by elasticity.metrics.reporters), Samza's `metrics.reporter.<name>.*` names ---

REPORTER_CLASSES = {"statsd": "statsd", "elasticity.metrics.reporters.StatsdReporter": "statsd"}


def _reporter_names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if len(set(names)) != len(names) or any(not re.fullmatch(r"[A-Za-z0-9_-]+", n) for n in names):
        raise ValueError(_reporter_names.allowed)  # type: ignore[attr-defined]
    return names


_reporter_names.allowed = "a comma-separated list of reporter names (letters, digits, _ and -), each once; empty = none"  # type: ignore[attr-defined]


def _statsd_prefix(text: str) -> str:
    value = text.strip()
    if not re.fullmatch(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*", value):
        raise ValueError(_statsd_prefix.allowed)  # type: ignore[attr-defined]
    return value


_statsd_prefix.allowed = "dot-separated names of letters, digits, _ and - (e.g. airflow.elasticity)"  # type: ignore[attr-defined]

METRICS_KEYS: tuple[Key, ...] = (
    Key("metrics.reporters", _reporter_names, (), "Metrics reporters, by name (Samza's key), e.g. statsd; empty: none; unset: Airflow's [metrics] statsd_on decides."),
    Key("metrics.reporter.<name>.class", _choice(REPORTER_CLASSES), None, "What a reporter is: statsd (the default for a reporter named statsd)."),
    Key("metrics.reporter.<name>.host", _nonempty, None, "StatsD host (default: Airflow's [metrics] statsd_host, else localhost)."),
    Key("metrics.reporter.<name>.port", _int_range(1, 65535), None, "StatsD UDP port (default: Airflow's [metrics] statsd_port, else 8125)."),
    Key("metrics.reporter.<name>.prefix", _statsd_prefix, None, "Prefix of every metric name (default: <Airflow's statsd_prefix>.elasticity, else elasticity)."),
)

KEYS: tuple[Key, ...] = (
    Key("job.name", _nonempty, None, "Name of the job; also names its state and checkpoints.", required=True),
    Key("job.id", _nonempty, "1", "Instance id of the job, as in Samza."),
    Key("task.inputs", _input_list, None, "Input streams, `system.stream` comma-separated; order matters for task.partition.scheme=max.", required=True),
    Key("job.default.system", _nonempty, None, "System for inputs written without one."),
    Key("job.elasticity.factor", _int_range(1, MAX_ELASTICITY_FACTOR), 1, f"Virtual tasks per task, one per key bucket (1 = elasticity off, max {MAX_ELASTICITY_FACTOR})."),
    Key("job.systemstreampartition.grouper.factory", _choice(GROUPER_NAMES), Grouper.GROUP_BY_PARTITION, "How SSPs are grouped into tasks (Samza class names or short names)."),
    Key("task.partition.scheme", _choice({s.value: s for s in PartitionScheme}), None, "SAMZA-71 scheme for GroupByPartition: max (a task per SSP) or cogroup (GCD of partition counts)."),
    Key("job.container.count", _int_range(1), 1, "Containers (Spark executor groups) the tasks are spread over."),
    Key("systems.<system>.consumer.bootstrap.servers", _nonempty, None, "Kafka bootstrap servers of a system (KAFKA_BOOTSTRAP_SERVERS overrides it)."),
    Key("systems.<system>.producer.bootstrap.servers", _nonempty, None, "Kafka bootstrap servers for output to a system."),
    Key("systems.<system>.samza.factory", _nonempty, None, "Samza's system factory class; accepted for compatibility, not used."),
    Key("systems.<system>.default.stream.offset.default", _offset_default, "upcoming", "Where the job's first generation starts on each partition: oldest or upcoming (partitions added later start at their oldest offset)."),
    Key("systems.<system>.default.stream.samza.offset.default", _offset_default, None, "Samza's name for the key above; the key above wins."),
    Key("task.checkpoint.store.url", store_url, None, "SQLAlchemy URL of the checkpoint store (ELASTICITY_CHECKPOINT_STORE_URL overrides it; default a SQLite file in $ELASTICITY_HOME)."),
    Key("task.checkpoint.write.versions", _versions, (1, 2), "Checkpoint versions written on every commit (1,2 = dual write)."),
    Key("task.checkpoint.read.versions", _versions, (1,), "Checkpoint versions read, in priority order."),
    Key("task.live.checkpoint.max.age", _int_range(0), 600_000, "A lower-priority checkpoint version newer by more than this many ms wins."),
    Key("task.checkpoint.history.size", _int_range(1, 1000), 10, "Checkpoints kept per virtual task and version."),
    Key("job.lease.ttl.ms", _int_range(1000), 300_000, "How long a batch or rescale holds the job's lease before another may take it."),
    Key("batch.max.records", _int_range(1), 100_000, "Most records one micro-batch reads over all partitions (like Spark's maxOffsetsPerTrigger)."),
    Key("batch.read.chunk.records", _int_range(1), 50_000, "Longest offset range one Spark task reads; longer ranges are cut into chunks read in parallel."),
    Key("app.class", _nonempty, "elasticity.apps.identity:build", "module:factory building the operator chain (default: the identity app, every record unchanged to parquet.output)."),
    Key("job.output.path", _nonempty, None, "Root of the Parquet outputs (default $ELASTICITY_HOME/<job>/output)."),
    Key("job.audit.path", _nonempty, None, "Parquet audit dataset, one row per processed input record (default $ELASTICITY_HOME/<job>/audit)."),
    Key("job.dead.letter.path", _nonempty, None, "Parquet dead-letter dataset (default $ELASTICITY_HOME/<job>/dead-letter)."),
    Key("job.elasticity.schedule", _nonempty, None, "Scheduled factors: '<cron> -> <factor>; ...' (e.g. '0 8 * * * -> 8; 0 20 * * * -> 2')."),
    Key("job.elasticity.scaling.autosize", _choice({"true": True, "false": False}), False, "Let the autosizer choose the factor from lag and processing rate."),
    Key("job.elasticity.scaling.autosize.min", _int_range(1, MAX_ELASTICITY_FACTOR), 1, "Smallest factor the autosizer may choose."),
    Key("job.elasticity.scaling.autosize.max", _int_range(1, MAX_ELASTICITY_FACTOR), 16, "Largest factor the autosizer may choose."),
    Key("job.elasticity.scaling.autosize.cooldown.ms", _int_range(0), 600_000, "No automatic change sooner than this after the last one."),
    Key("job.elasticity.scaling.autosize.target.lag.seconds", _int_range(1), 60, "The autosizer sizes the job to drain its backlog within this."),
    Key("airflow.microbatch.schedule", _nonempty, "*/1 * * * *", "Cron schedule of the job's elastic_microbatch DAG."),
    Key("airflow.microbatch.max.seconds", _int_range(1), 45, "A micro-batch DAG run starts no new batch after this many seconds (keep it below the schedule interval)."),
    Key("job.elasticity.manual.hold.ms", _int_range(0), 3_600_000, "A rescale a person asked for holds this long against the schedule and the autosizer."),
    Key("job.report.path", _nonempty, None, "Folder of the data-quality reports (default $ELASTICITY_HOME/<job>/reports)."),
    Key("task.dead.letter.policy", _choice({"dlq": "dlq", "fail": "fail"}), "dlq", "dlq: a bad record goes to the dead-letter sink; fail: its task stops there and the batch fails."),
    Key("task.max.concurrency", _int_range(1, 10_000), 1, "flat_map_async calls in flight per virtual task."),
    Key("task.callback.timeout.ms", _callback_timeout, None, "A flat_map_async call slower than this fails its record (timeout); -1, Samza's default, means no timeout."),
    Key("job.container.process.count", _int_range(1, 64), 1, "Python processes per container; its virtual tasks are dealt over them (CPU-bound apps: no GIL shared between them)."),
    Key("job.container.thread.pool.size", _int_range(0, 1024), None, "0: a container's virtual tasks run one after another; N: a pool of N threads; unset: one thread per virtual task, at most 64."),
    Key("task.commit.max.delay.ms", _int_range(0), 60_000, "An upload still running at the next commit: within this delay the new commit is skipped, beyond it the new commit waits."),
    Key("task.commit.timeout.ms", _int_range(1), 1_800_000, "Longest a checkpoint upload may take before the batch fails."),
    Key("spark.master", _nonempty, None, "Spark master of a classic session (default: the embedded Spark Connect server when it runs, else local[*])."),
    Key("spark.remote", _nonempty, None, "Spark Connect URL (sc://host:15002); used instead of spark.master when set."),
    Key("systems.<system>.samza.key.serde", _choice({"string": "string", "json": "json", "byte": "byte"}), "string", "Key serde of a system: string, json or byte."),
    Key("systems.<system>.samza.msg.serde", _choice({"string": "string", "json": "json", "byte": "byte"}), "json", "Message serde of a system: string, json or byte."),
    *STATE_KEYS,
    *METRICS_KEYS,
    Key("job.config.strict", _choice({"true": True, "false": False}), False, "true: an unknown key is an error, not a warning (the CLI's --strict does the same)."),
)


@dataclass(frozen=True)
class JobConfig:
    """A validated job configuration; `raw` keeps every key as written."""

    raw: tuple[tuple[str, str], ...]
    job_name: str
    job_id: str
    inputs: tuple[SystemStream, ...]
    elasticity_factor: int
    grouper: Grouper
    partition_scheme: PartitionScheme | None
    container_count: int
    checkpoint_write_versions: tuple[int, ...] = (1, 2)
    checkpoint_read_versions: tuple[int, ...] = (1,)
    live_checkpoint_max_age_ms: int = 600_000
    checkpoint_history_size: int = 10
    lease_ttl_ms: int = 300_000
    batch_max_records: int = 100_000
    read_chunk_records: int = 50_000
    app_class: str = "elasticity.apps.identity:build"
    dead_letter_policy: str = "dlq"
    max_concurrency: int = 1
    callback_timeout_ms: int | None = None
    thread_pool_size: int | None = None
    container_process_count: int = 1
    commit_max_delay_ms: int = 60_000
    commit_timeout_ms: int = 1_800_000

    @property
    def raw_map(self) -> dict[str, str]:
        return dict(self.raw)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.raw_map.get(key, default)

    def bootstrap_servers(self, system: str) -> str | None:
        """KAFKA_BOOTSTRAP_SERVERS wins, as Airflow's env overrides do; then the config."""
        return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or self.get(f"systems.{system}.consumer.bootstrap.servers")

    def offset_default(self, system: str) -> str:
        """oldest|upcoming for partitions that have no checkpoint yet."""
        return (
            self.get(f"systems.{system}.default.stream.offset.default")
            or self.get(f"systems.{system}.default.stream.samza.offset.default")
            or "upcoming"
        )

    def serde(self, system: str, what: str) -> str:
        """`key` or `msg` serde of a system."""
        return self.get(f"systems.{system}.samza.{what}.serde") or ("string" if what == "key" else "json")

    def path(self, key: str, leaf: str) -> str:
        """job.output.path / job.audit.path / job.dead.letter.path, defaulting under the state folder."""
        home = Path(os.environ.get("ELASTICITY_HOME", ".elasticity")).resolve()
        return self.get(key) or str(home / self.job_name / leaf)

    def checkpoint_store_url(self) -> str:
        env = os.environ.get("ELASTICITY_CHECKPOINT_STORE_URL")
        if env:
            try:
                return store_url(env)
            except ValueError as e:
                raise ConfigError(f"ELASTICITY_CHECKPOINT_STORE_URL={env!r}: expected {e}") from None
        return (
            self.get("task.checkpoint.store.url")
            or f"sqlite:///{Path(os.environ.get('ELASTICITY_HOME', '.elasticity')).resolve() / 'checkpoints.db'}"
        )

    def with_overrides(self, overrides: Mapping[str, str]) -> JobConfig:
        """A copy with some keys replaced, validated again (e.g. a new elasticity factor)."""
        return validate({**self.raw_map, **overrides}, warn_unknown=False)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(value: str) -> str:
    """java.util.Properties escapes: `\\\\` is one backslash, `\\t` a tab, `\\uXXXX` a character, `\\x` is x."""
    return re.sub(
        r"\\(u[0-9a-fA-F]{4}|.)",
        lambda m: chr(int(m[1][1:], 16)) if len(m[1]) == 5 else _ESCAPES.get(m[1], m[1]),
        value,
    )


def parse_properties(text: str) -> dict[str, str]:
    """Java `.properties` lines, as Samza reads them: `key=value` or `key: value`,
    `#`/`!` comments, a line ending in an odd number of `\\` continues, escapes in values."""
    props: dict[str, str] = {}
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1:
            pending += stripped[:-1]
            continue
        logical, pending = pending + stripped, ""
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", logical)
        if not m:
            raise ConfigError(f"line {logical!r} is not key=value")
        props[m.group(1)] = _unescape(m.group(2).strip())
    return props


def _find_key(name: str) -> Key | None:
    for key in KEYS:
        if key.pattern.match(name):
            return key
    return None


def did_you_mean(name: str) -> str | None:
    """The known key nearest to an unknown one; `<system>`-like parts take the name's own parts."""
    parts = name.split(".")
    candidates = []
    for key in KEYS:
        template = key.name.split(".")
        candidates.append(".".join(parts[i] if t.startswith("<") and i < len(parts) else t for i, t in enumerate(template)))
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return close[0] if close else None


def validate(props: Mapping[str, str], strict: bool = False, warn_unknown: bool = True) -> JobConfig:
    """The typed config, or one ConfigError listing every problem.

    Unknown keys are errors when `strict` (or `job.config.strict=true`), else warnings.
    """
    errors: list[str] = []
    values: dict[str, Any] = {}
    strict = strict or props.get("job.config.strict", "").strip() == "true"
    for name, value in props.items():
        key = _find_key(name)
        if key is None:
            hint = did_you_mean(name)
            message = f"unknown config key {name!r}" + (f" (did you mean {hint!r}?)" if hint else "")
            if strict:
                errors.append(f"{message}; job.config.strict=true (or --strict) does not allow unknown keys")
            elif warn_unknown:
                warnings.warn(f"{message}; ignored", ConfigWarning, stacklevel=3)
            continue
        try:
            values[name] = key.parse(value)
        except ValueError as e:
            errors.append(f"{name}={value!r}: expected {e}")
    for key in KEYS:
        if key.required and key.name not in props:
            errors.append(f"{key.name} is required: {key.doc}")

    def get(name: str) -> Any:
        if name in values:
            return values[name]
        return next(k.default for k in KEYS if k.name == name)

    inputs: list[SystemStream] = []
    default_system = get("job.default.system")
    for item in get("task.inputs") or ():
        if "." in item:
            inputs.append(SystemStream.parse(item))
        elif default_system:
            inputs.append(SystemStream(default_system, item))
        else:
            errors.append(f"task.inputs={item!r}: expected system.stream (or set job.default.system)")
    for ss in inputs:
        if re.search(r"\.\d+$", ss.stream):
            errors.append(
                f"task.inputs={str(ss)!r}: a stream name ending in '.<digits>' is ambiguous in Samza's "
                "checkpoint keys (system.stream.partition[.keyBucket]); expected a stream whose last dotted part is not a number"
            )
    if len(set(inputs)) != len(inputs):
        errors.append(f"task.inputs={props.get('task.inputs')!r}: expected each stream once")
    grouper: Grouper = get("job.systemstreampartition.grouper.factory")
    scheme: PartitionScheme | None = get("task.partition.scheme")
    if scheme is not None and grouper is not Grouper.GROUP_BY_PARTITION:
        errors.append(
            f"task.partition.scheme={scheme.value!r}: applies only to GroupByPartition, "
            f"but job.systemstreampartition.grouper.factory is {grouper.value}"
        )
    if grouper is Grouper.ALL_SSP_TO_SINGLE_TASK and get("job.elasticity.factor") > 1:
        errors.append(
            f"job.elasticity.factor={props['job.elasticity.factor']!r}: AllSspToSingleTask does not support "
            "elasticity (it needs tasks = containers); expected 1, or use GroupByPartition / GroupBySystemStreamPartition"
        )
    if grouper is Grouper.ALL_SSP_TO_SINGLE_TASK and get("job.container.count") > 1:
        errors.append(
            f"job.container.count={props['job.container.count']!r}: with AllSspToSingleTask every container "
            "would read every SSP and process each record once per container; expected 1"
        )
    for name in get("metrics.reporters"):
        if f"metrics.reporter.{name}.class" not in props and name not in REPORTER_CLASSES:
            errors.append(
                f"metrics.reporters={props['metrics.reporters']!r} names {name!r}, but metrics.reporter.{name}.class is not set; "
                f"expected it set to one of {', '.join(sorted(REPORTER_CLASSES))}"
            )
    read_v, write_v = get("task.checkpoint.read.versions"), get("task.checkpoint.write.versions")
    if not set(read_v) & set(write_v):
        errors.append(
            f"task.checkpoint.read.versions={','.join(map(str, read_v))!r}: reads none of the versions that "
            f"task.checkpoint.write.versions={','.join(map(str, write_v))!r} writes; expected at least one in common"
        )
    if errors:
        raise ConfigError("invalid job config:\n  " + "\n  ".join(errors))
    return JobConfig(
        raw=tuple(sorted(props.items())),
        job_name=get("job.name"),
        job_id=get("job.id"),
        inputs=tuple(inputs),
        elasticity_factor=get("job.elasticity.factor"),
        grouper=grouper,
        partition_scheme=scheme,
        container_count=get("job.container.count"),
        checkpoint_write_versions=get("task.checkpoint.write.versions"),
        checkpoint_read_versions=get("task.checkpoint.read.versions"),
        live_checkpoint_max_age_ms=get("task.live.checkpoint.max.age"),
        checkpoint_history_size=get("task.checkpoint.history.size"),
        lease_ttl_ms=get("job.lease.ttl.ms"),
        batch_max_records=get("batch.max.records"),
        read_chunk_records=get("batch.read.chunk.records"),
        app_class=get("app.class"),
        dead_letter_policy=get("task.dead.letter.policy"),
        max_concurrency=get("task.max.concurrency"),
        callback_timeout_ms=get("task.callback.timeout.ms"),
        thread_pool_size=get("job.container.thread.pool.size"),
        container_process_count=get("job.container.process.count"),
        commit_max_delay_ms=get("task.commit.max.delay.ms"),
        commit_timeout_ms=get("task.commit.timeout.ms"),
    )


def load_config(path: str | os.PathLike[str], strict: bool = False) -> JobConfig:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror}") from e
    try:
        return validate(parse_properties(text), strict)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from e
