"""What a job reads and writes, named as OpenLineage's dataset naming spec names them, for the Airflow
operators' lineage (`elasticity.airflow.lineage`): Kafka topics in namespace `kafka://<host>:<port>` (the first
bootstrap server of the system's clients) named by the topic, and Parquet datasets by where they are: a local
folder in namespace `file` named by its absolute path, an object store in `<scheme>://<bucket>` named by the key
prefix (`s3a://` as `s3://`), any other URI in `<scheme>://<authority>` named by its path. Plain data: no Airflow,
no OpenLineage client here.

Inputs: the job's input topics and its tables' side inputs. Outputs: the app's `kafka.<topic>` and
`parquet.<name>` outputs, the audit and dead-letter datasets, and the stores' changelog topics. A Parquet
dataset carries its columns (name, type): the sinks' own schemas today; a typed output gives its declared fields
through `fields`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import pyarrow as pa

from elasticity.api.stream import ApplicationDescriptor, load_application
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA
from elasticity.config import JobConfig
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.admin import client_settings

Fields = tuple[tuple[str, str], ...]
"""A dataset's columns as (name, type), in order."""

OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs"}  # scheme -> the spec's namespace scheme


@dataclass(frozen=True)
class LineageDataset:
    namespace: str
    name: str
    fields: Fields = ()


@dataclass(frozen=True)
class JobDatasets:
    inputs: tuple[LineageDataset, ...]
    outputs: tuple[LineageDataset, ...]


def kafka_dataset(bootstrap: str, topic: str) -> LineageDataset:
    """`kafka://<host>:<port>` of the first bootstrap server (a scheme such as `SASL_SSL://` dropped), the topic."""
    first = bootstrap.split(",")[0].strip()
    first = first.split("://", 1)[-1]
    return LineageDataset(f"kafka://{first}", topic)


def path_dataset(location: str, fields: Fields = ()) -> LineageDataset:
    """A folder or URI as the naming spec names it; a URI's query (endpoint settings) is not part of the name."""
    if "://" not in location:
        return LineageDataset("file", os.path.abspath(location), fields)
    url = urlsplit(location)
    scheme = url.scheme.lower()
    if scheme == "file":
        return LineageDataset("file", url.path, fields)
    if scheme in OBJECT_STORES:
        return LineageDataset(f"{OBJECT_STORES[scheme]}://{url.netloc}", url.path.strip("/") or "/", fields)
    return LineageDataset(f"{scheme}://{url.netloc}", url.path or "/", fields)


def arrow_fields(schema: pa.Schema) -> Fields:
    return tuple((f.name, str(f.type)) for f in schema)


OUTPUT_FIELDS, AUDIT_FIELDS, DEAD_LETTER_FIELDS = (arrow_fields(s) for s in (OUTPUT_SCHEMA, AUDIT_SCHEMA, DEAD_LETTER_SCHEMA))


def _topic(config: JobConfig, stream: SystemStream, role: str) -> LineageDataset:
    return kafka_dataset(client_settings(config, stream.system, role).bootstrap, stream.stream)


def job_datasets(
    config: JobConfig, app: ApplicationDescriptor | None = None, *, output_fields: dict[str, Fields] | None = None
) -> JobDatasets:
    """The job's datasets; `app`: the built app (None: built here from `app.class`); `output_fields`: a Parquet
    output's declared columns by output name (typed outputs), else the untyped sink's."""
    app = app if app is not None else load_application(config.app_class, config.inputs)
    declared = output_fields or {}
    inputs = [_topic(config, ss, "consumer") for ss in config.inputs]
    for table in app.tables.values():
        sides = config.get(f"stores.{table.name}.side.inputs")
        streams = [s.strip() for s in sides.split(",")] if sides else list(table.side_inputs)
        inputs += [_topic(config, SystemStream.parse(s), "consumer") for s in streams if s]
    outputs = []
    root = config.output_dir.rstrip("/")
    for out in sorted(app.outputs.values(), key=lambda o: (o.system, o.name)):
        if out.kind == "parquet":
            outputs.append(path_dataset(f"{root}/{out.name}", declared.get(out.name, OUTPUT_FIELDS)))
        else:
            outputs.append(_topic(config, SystemStream(out.system, out.name), "producer"))
    outputs += [path_dataset(config.audit_dir, AUDIT_FIELDS), path_dataset(config.dead_letter_dir, DEAD_LETTER_FIELDS)]
    outputs += [_topic(config, changelog, "producer") for changelog in config.changelogs()]
    return JobDatasets(tuple(dict.fromkeys(inputs)), tuple(dict.fromkeys(outputs)))


def fields_of(pairs: Sequence[tuple[str, str]]) -> Fields:
    """Declared (name, type) pairs as a dataset's fields (a typed output's schema)."""
    return tuple((str(n), str(t)) for n, t in pairs)
