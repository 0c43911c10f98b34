"""The job's configuration: `JobConfig` declares every job-level key, once, as a field (in parts by concern,
as Samza splits its config classes: `job_keys`, `batch_keys`, `dag_keys`, `task_keys`, `state_keys`, the
fields in this order in the reference); `validate` turns `.properties` into it in three named steps.

1. `_parse_keys`: every key through its parser (a bad value names the key, the value
   and what is allowed; an unknown key gets the nearest known one, "did you mean").
2. `_resolve_inputs`: task.inputs as SystemStreams, job.default.system filled in.
3. `check_rules`: the cross-key rules of `elasticity.config.rules`.

Each step reports everything it finds, so one load names every problem.
"""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from elasticity.config.batch_keys import BatchKeys
from elasticity.config.compat import differences, idle_factor, not_run_reporters
from elasticity.config.connections import Connections
from elasticity.config.dag_keys import DagKeys
from elasticity.config.errors import ConfigError, ConfigWarning
from elasticity.config.home import elasticity_home
from elasticity.config.job_keys import JobKeys
from elasticity.config.kafka_clients import property_problem, shown
from elasticity.config.keys import (
    KAFKA_CLIENT_KEYS,
    REPORTER_KEYS,
    STORE_KEYS,
    SYSTEM_KEYS,
    Key,
    declared_keys,
    key,
)
from elasticity.config.names import TOPIC_ALLOWED, is_topic
from elasticity.config.parsers import (
    flag,
    reporter_names,
    store_url,
)
from elasticity.config.properties import read_properties
from elasticity.config.rules import Parsed, check_rules
from elasticity.config.state_keys import StateKeys
from elasticity.config.task_keys import TaskKeys
from elasticity.jobmodel.model import SystemStream


@dataclass(frozen=True, kw_only=True)
class JobConfig(StateKeys, TaskKeys, DagKeys, BatchKeys, JobKeys):
    """A validated job configuration: a typed field per job-level key (its bases declare them by concern), and
    `raw`, every key as written (keys with a `<part>` in their name are read from it with `value`)."""

    raw: tuple[tuple[str, str], ...] = field(repr=False)  # may hold secrets (Kafka client passwords)
    connections: Connections | None = field(default=None, repr=False, compare=False)
    """The deployment's connections over the config (`with_connections`); None: the process environment's."""

    # --- metrics (read by elasticity.metrics.reporters) ---
    metrics_reporters: tuple[str, ...] | None = key(
        "metrics.reporters",
        reporter_names,
        None,
        doc="Metrics reporters, by name (Samza's key), e.g. statsd; empty: none; unset: Airflow's [metrics] statsd_on decides.",
        samza="Samza's key; reporters here are StatsD (Samza's JMX and snapshot reporters need its JVM)",
    )

    strict: bool = key(
        "job.config.strict",
        flag,
        "false",
        doc="true: an unknown key is an error, not a warning (the CLI's --strict does the same).",
    )

    @property
    def raw_map(self) -> dict[str, str]:
        return dict(self.raw)

    @property
    def shown_map(self) -> dict[str, str]:
        """Every key as written, secrets masked: what a stored job model, a log or a page may hold."""
        return {k: shown(k, v) for k, v in self.raw}

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.raw_map.get(key, default)

    def value(self, name: str) -> Any:
        """The typed value of any key, one with a `<part>` too (`systems.kafka.samza.msg.serde`): as written, else its default."""
        return key_value(self.raw_map, name)

    @property
    def deployment(self) -> Connections:
        """The connections in force: those given with `with_connections`, else the process environment's."""
        return self.connections or Connections.from_env()

    def with_connections(self, connections: Connections) -> JobConfig:
        return replace(self, connections=connections)

    def bootstrap_servers(self, system: str) -> str | None:
        """The deployment's servers win (a connection, KAFKA_BOOTSTRAP_SERVERS), as Airflow's env overrides do; then the config."""
        return self.deployment.bootstrap_servers or self.get(f"systems.{system}.consumer.bootstrap.servers")

    def offset_default(self, system: str) -> str:
        """oldest|upcoming for partitions that have no checkpoint yet: Samza's key, then its deprecated
        one (SystemConfig.getSystemOffsetDefault), then this product's earlier name, else upcoming."""
        names = [f"systems.{system}.{k}" for k in OFFSET_DEFAULT_KEYS]
        return next((self.value(n) for n in names if (self.get(n) or "").strip()), self.value(names[0]))

    def changelog(self, store: str) -> SystemStream | None:
        """`stores.<store>.changelog` as Samza's StorageConfig reads it: system.stream, or a bare stream
        of job.changelog.system (else job.default.system); the rules checked one of them is set."""
        text = (self.get(f"stores.{store}.changelog") or "").strip()
        if not text:
            return None  # blank: no changelog, as Samza's trimToNull
        if "." in text:
            return SystemStream.parse(text)
        system = self.changelog_system or self.default_system
        assert system is not None, "checked by the rule changelogs_have_a_system"
        return SystemStream(system, text)

    def changelogs(self) -> dict[SystemStream, str]:
        """Every store's changelog stream -> the store, from the `stores.<s>.changelog` keys."""
        stores = {k.split(".")[1] for k in self.raw_map if k.startswith("stores.") and k.endswith(".changelog")}
        return {cl: s for s in sorted(stores) if (cl := self.changelog(s)) is not None}

    def serde(self, system: str, what: str) -> str:
        """`key` or `msg` serde of a system."""
        return self.value(f"systems.{system}.samza.{what}.serde")

    def path(self, key: str, leaf: str) -> str:
        """job.output.path / job.audit.path / job.dead.letter.path / job.report.path, defaulting under the state folder."""
        return self.get(key) or str(elasticity_home() / self.job_name / leaf)

    @property
    def output_dir(self) -> str:
        """Root of the Parquet outputs: job.output.path, else $ELASTICITY_HOME/<job>/output (a URI on object storage)."""
        return self.path("job.output.path", "output")

    @property
    def audit_dir(self) -> str:
        """The Parquet audit dataset: job.audit.path, else $ELASTICITY_HOME/<job>/audit."""
        return self.path("job.audit.path", "audit")

    @property
    def dead_letter_dir(self) -> str:
        """The Parquet dead-letter dataset: job.dead.letter.path, else $ELASTICITY_HOME/<job>/dead-letter."""
        return self.path("job.dead.letter.path", "dead-letter")

    @property
    def report_location(self) -> str:
        """Where the data-quality reports go: job.report.path (a folder or an object-store URI); else, when
        blob.store.uri is an object store, `<blob.store.uri>/reports/<job>` (the API server reads them from
        there, whichever worker wrote them); else the folder $ELASTICITY_HOME/<job>/reports."""
        if self.report_path:
            return self.report_path
        blobs = self.blob_store_uri or ""
        if "://" in blobs:
            base, q, query = blobs.partition("?")
            return f"{base.rstrip('/')}/reports/{quote(self.job_name, safe='-_.')}" + (f"?{query}" if q else "")
        return str(elasticity_home() / self.job_name / "reports")

    def checkpoint_store_url(self) -> str:
        """The deployment's store (a connection, ELASTICITY_CHECKPOINT_STORE_URL) wins; then the config's."""
        given = self.deployment.store_url
        if given:
            try:
                return store_url(given)
            except ValueError as e:
                raise ConfigError(f"ELASTICITY_CHECKPOINT_STORE_URL={given!r}: expected {e}") from None
        return self.configured_store_url or f"sqlite:///{elasticity_home() / 'checkpoints.db'}"

    def with_overrides(self, overrides: Mapping[str, str]) -> JobConfig:
        """A copy with some keys replaced, validated again (e.g. a new elasticity factor)."""
        return replace(validate({**self.raw_map, **overrides}, warn_unknown=False), connections=self.connections)


OFFSET_DEFAULT_KEYS = ("default.stream.samza.offset.default", "samza.offset.default", "default.stream.offset.default")
"""`systems.<system>.` + each, in the order they are read."""

FIELD_KEYS: tuple[tuple[str, Key], ...] = declared_keys(JobConfig)
"""(JobConfig field, key) of every job-level key."""

KEYS: tuple[Key, ...] = (*(k for _, k in FIELD_KEYS), *SYSTEM_KEYS, *KAFKA_CLIENT_KEYS, *STORE_KEYS, *REPORTER_KEYS)
"""Every key the product reads."""

_DEFAULTS: dict[str, Any] = {k.name: k.default_value for _, k in FIELD_KEYS}


def find_key(name: str) -> Key | None:
    for k in KEYS:
        if k.pattern.match(name):
            return k
    return None


def key_value(props: Mapping[str, str], name: str) -> Any:
    """The typed value of one key of unvalidated properties: as written, else its declared default.
    For DAG files, which read a key or two of every job at parse time without validating the job."""
    found = find_key(name)
    if found is None:
        raise KeyError(f"no config key {name!r}")
    text = props.get(name)
    if text is None:
        return found.default_value
    try:
        return found.parser(text)
    except ValueError as e:
        raise ConfigError(f"{name}={text.strip()!r}: expected {e}") from None


def did_you_mean(name: str) -> str | None:
    """The known key nearest to an unknown one; `<system>`-like parts take the name's own parts."""
    parts = name.split(".")
    candidates = []
    for k in KEYS:
        template = k.name.split(".")
        candidates.append(".".join(parts[i] if t.startswith("<") and i < len(parts) else t for i, t in enumerate(template)))
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return close[0] if close else None


def _parse_keys(props: Mapping[str, str], *, strict: bool, warn_unknown: bool) -> tuple[dict[str, Any], list[str]]:
    """Every key's typed value by name (a job-level key unset or invalid: its default), and the problems:
    a bad value, a missing required key, an unknown key when `strict`."""
    values, errors = dict(_DEFAULTS), []
    for name, text in props.items():
        found = find_key(name)
        if found is None and (refused := property_problem(name)):
            hint = did_you_mean(name)  # a Kafka client property kafka-python cannot honour: never dropped silently
            errors.append(refused + (f" (did you mean {hint!r}?)" if hint else ""))
            continue
        if found is None:
            hint = did_you_mean(name)
            message = f"unknown config key {name!r}" + (f" (did you mean {hint!r}?)" if hint else "")
            if strict:
                errors.append(f"{message}; job.config.strict=true (or --strict) does not allow unknown keys")
            elif warn_unknown:
                warnings.warn(f"{message}; ignored", ConfigWarning, stacklevel=4)  # validate's caller's caller
            continue
        if found.deprecated_for:
            warnings.warn(f"{found.name} is deprecated: use {found.deprecated_for}", ConfigWarning, stacklevel=4)
        try:
            values[name] = found.parser(text)
        except ValueError as e:
            errors.append(f"{name}={shown(name, repr(text))}: expected {e}")
    errors += [f"{k.name} is required: {k.doc}" for k in KEYS if k.required and k.name not in props]
    return values, errors


def _resolve_inputs(values: Mapping[str, Any]) -> tuple[tuple[SystemStream, ...], list[str]]:
    """task.inputs as SystemStreams: an item without a system takes job.default.system."""
    inputs, errors = [], []
    default_system = values["job.default.system"]
    for item in values["task.inputs"] or ():
        if "." in item:
            stream = SystemStream.parse(item)
        elif default_system:
            stream = SystemStream(default_system, item)
        else:
            errors.append(f"task.inputs={item!r}: expected system.stream (or set job.default.system)")
            continue
        if is_topic(stream.stream):
            inputs.append(stream)
        else:
            errors.append(f"task.inputs={item!r}: stream {stream.stream!r} is not {TOPIC_ALLOWED}")
    return tuple(inputs), errors


def validate(props: Mapping[str, str], *, strict: bool = False, warn_unknown: bool = True) -> JobConfig:
    """The typed config, or one ConfigError listing every problem.

    Unknown keys are errors when `strict` (or `job.config.strict=true`), else warnings.
    """
    strict = strict or props.get("job.config.strict", "").strip() == "true"
    values, errors = _parse_keys(props, strict=strict, warn_unknown=warn_unknown)
    values["task.inputs"], unresolved = _resolve_inputs(values)
    errors += unresolved
    errors += check_rules(Parsed(values, props))
    if errors:
        raise ConfigError("invalid job config:\n  " + "\n  ".join(errors))
    if warn_unknown:
        for note in not_run_reporters(props) + idle_factor(values) + (differences(values, props) if strict else []):
            warnings.warn(note, ConfigWarning, stacklevel=3)
    return JobConfig(raw=tuple(sorted(props.items())), **{name: values[k.name] for name, k in FIELD_KEYS})


def load_config(path: str | os.PathLike[str], *, strict: bool = False) -> JobConfig:
    p = Path(path)
    props = read_properties(p)
    try:
        return validate(props, strict=strict)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from e
