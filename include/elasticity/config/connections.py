"""Where a deployment says a job's Kafka system and checkpoint store are, over what the job config says: an
orchestrator's connections (Airflow's, resolved in its own layer) or the environment of a process started for
the job (a spark-submit driver, the CLI). Carried by the JobConfig itself, so one process can serve many jobs,
each through its own connections, without rewriting its environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from elasticity.config.kafka_clients import ENV_PROPERTIES as PROPERTIES_ENV

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
STORE_ENV = "ELASTICITY_CHECKPOINT_STORE_URL"


@dataclass(frozen=True)
class Connections:
    """A field left None leaves the job config's own setting in force. The Kafka properties stay the JSON text
    KAFKA_CLIENT_PROPERTIES holds until the clients are made, where a bad one is reported with the rest."""

    bootstrap_servers: str | None = None
    kafka_properties: str | None = field(default=None, repr=False)  # a JSON object of Kafka properties; secrets
    store_url: str | None = field(default=None, repr=False)  # may hold a password

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Connections:
        """What a process started for the job was given (`env()`'s variables)."""
        return cls(*(environ.get(name) or None for name in (BOOTSTRAP_ENV, PROPERTIES_ENV, STORE_ENV)))

    def over(self, fallback: Connections) -> Connections:
        """These connections, `fallback`'s where these say nothing."""
        return Connections(
            self.bootstrap_servers or fallback.bootstrap_servers,
            self.kafka_properties or fallback.kafka_properties,
            self.store_url or fallback.store_url,
        )

    def env(self) -> dict[str, str]:
        """The environment that gives a process started for the job (spark-submit) these connections."""
        values = (self.bootstrap_servers, self.kafka_properties, self.store_url)
        return {name: v for name, v in zip((BOOTSTRAP_ENV, PROPERTIES_ENV, STORE_ENV), values, strict=True) if v}
