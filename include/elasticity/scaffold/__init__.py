"""`elasticity init`: a new project of the user's own, outside any checkout of this library.

It holds what `elasticity.airflow.project` looks for in the current directory (`dags/`, `plugins/`,
`include/jobs/`), so `elasticity run-batch` and `elasticity airflow` work from it; a job config in
Samza's keys; an app module at its root (importable from there, as `app.class` names it) and its test
on `elasticity.testing`. The DAG and plugin files are the thin ones of this library's own project: the
DAGs and the job page are the installed library's. The templates ship in the package (package data).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from string import Template

JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
BIG_ORDER = 100
"""The app's threshold: `elasticity feed` writes amounts from 1 to 500."""

DAGS = (
    "elastic_autosize",
    "elastic_data_quality",
    "elastic_jobs_check",
    "elastic_maintenance",
    "elastic_microbatch",
    "elastic_replay",
    "elastic_rescale",
    "elastic_scale_schedule",
)
PLUGINS = ("elasticity_plugin",)
FORMATS = ("json", "avro")
"""`elasticity init --format`: the orders' format on the topic (avro: Confluent's wire format, a Schema Registry)."""

_AVRO_NOTE = """

This job reads Avro records in Confluent's wire format through a Schema Registry (`serializers.registry.orders.*`
in the config; elasticity's docs: Formats and schemas). `feed` writes JSON, which this job sends to the dead
letters (`bad magic byte 0x7b`): produce the topic's records with a Schema Registry serializer (confluent-kafka's
`AvroSerializer`, or `elasticity.serializers.serialize` with the job's serde), and set the registry's URL (or the
Airflow connection `schema_registry_default`) in place of the in-memory `mock://` one before it reads a real
topic."""

_JSON_SERDES = """systems.kafka.samza.key.serde=string
systems.kafka.samza.msg.serde=json"""

_AVRO_SERDES = """systems.kafka.samza.key.serde=string
# The orders are Avro records in Confluent's wire format, their schemas in a Schema Registry (docs: Formats and
# schemas). mock:// is confluent-kafka's in-memory registry, for the tests here: set your registry's URL (or an
# Airflow connection, airflow.connection.schema.registry) before the job reads a real topic.
serializers.registry.orders.class=avro
serializers.registry.orders.schema.registry.url=mock://${job}
serializers.registry.orders.schema={"type": "record", "name": "Order", "namespace": "${module}", "fields": [{"name": "key", "type": ["null", "string"]}, {"name": "seq", "type": "long"}, {"name": "amount", "type": "double"}]}
systems.kafka.samza.msg.serde=orders
# Typed columns beside the output's own (key, value, seq, ...): pandas, pyarrow and Spark read them typed
outputs.big_orders.schema=amount DOUBLE NOT NULL, cents BIGINT NOT NULL"""


class ScaffoldError(ValueError):
    """The project cannot be written there (a folder in use, a bad job name); the message says which."""


@dataclass(frozen=True)
class Scaffold:
    """What a new project is made of, for job `job`: its input topic is the job's name."""

    job: str
    format: str = "json"

    @property
    def module(self) -> str:
        """The app's module: a Python name, however the job is spelled."""
        return f"{self.job.replace('-', '_')}_app"

    @property
    def config_path(self) -> str:
        return f"include/jobs/{self.job}.properties"

    def files(self) -> dict[str, str]:
        """Path in the project -> template (under `templates/`); `.tmpl` ones take the job's names."""
        out = {f"dags/{d}.py": f"dags/{d}.py.tmpl" for d in DAGS}
        out |= {f"plugins/{p}.py": f"plugins/{p}.py.tmpl" for p in PLUGINS}
        out |= {
            self.config_path: "job.properties.tmpl",
            f"{self.module}.py": "app.py.tmpl",
            f"tests/test_{self.module}.py": "test_app.py.tmpl",
            "README.md": "README.md.tmpl",
            "pyproject.toml": "pyproject.toml.tmpl",
            ".gitignore": "gitignore.tmpl",
        }
        return out

    def render(self, template: str) -> str:
        text = files(__package__).joinpath("templates", *template.split("/")).read_text()
        if template.startswith(("dags/", "plugins/")):
            return text  # the library's own thin files, as they are
        names = {"job": self.job, "topic": self.job, "module": self.module, "config": self.config_path, "big": BIG_ORDER}
        names["serdes"] = Template(_AVRO_SERDES if self.format == "avro" else _JSON_SERDES).substitute(names)
        names["format_note"] = _AVRO_NOTE if self.format == "avro" else ""
        return Template(text).substitute(names)


def init_project(folder: str | Path, job: str = "orders", format: str = "json") -> list[Path]:
    """Write a new project into `folder` (made if missing; refused unless empty); the files written."""
    if not JOB_NAME.fullmatch(job):
        raise ScaffoldError(f"--job {job!r}: a job name is a letter, then letters, digits, '_' or '-'")
    if format not in FORMATS:
        raise ScaffoldError(f"--format {format!r}: expected one of {', '.join(FORMATS)}")
    root = Path(folder).resolve()
    if root.exists() and not root.is_dir():
        raise ScaffoldError(f"{root} is a file, not a folder")
    if root.is_dir() and any(root.iterdir()):
        raise ScaffoldError(f"{root} is not empty: `elasticity init` writes a new project into an empty or new folder only")
    scaffold = Scaffold(job, format)
    texts = {root / path: scaffold.render(template) for path, template in scaffold.files().items()}  # all or nothing
    for target, text in texts.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return list(texts)
