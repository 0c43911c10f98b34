"""Where a deployment says a job's Kafka system and checkpoint store are, over what the job config says: an
orchestrator's connections (Airflow's, resolved in its own layer) or the environment of a process started for
the job (a spark-submit driver, the CLI). Carried by the JobConfig itself, so one process can serve many jobs,
each through its own connections, without rewriting its environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field

from elasticity.config.kafka_clients import ENV_PROPERTIES as PROPERTIES_ENV

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
STORE_ENV = "ELASTICITY_CHECKPOINT_STORE_URL"
REGISTRY_ENV = "SCHEMA_REGISTRY_URL"
REGISTRY_AUTH_ENV = "SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO"
ENV_NAMES = (BOOTSTRAP_ENV, PROPERTIES_ENV, STORE_ENV, REGISTRY_ENV, REGISTRY_AUTH_ENV)


@dataclass(frozen=True)
class Connections:
    """A field left None leaves the job config's own setting in force. The Kafka properties stay the JSON text
    KAFKA_CLIENT_PROPERTIES holds until the clients are made, where a bad one is reported with the rest."""

    bootstrap_servers: str | None = None
    kafka_properties: str | None = field(default=None, repr=False)  # a JSON object of Kafka properties; secrets
    store_url: str | None = field(default=None, repr=False)  # may hold a password
    _: KW_ONLY
    schema_registry_url: str | None = None  # the Schema Registry of every registered serde (elasticity.formats)
    schema_registry_user_info: str | None = field(default=None, repr=False)  # its basic auth, user:password

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Connections:
        """What a process started for the job was given (`env()`'s variables)."""
        bootstrap, properties, store, registry, auth = (environ.get(name) or None for name in ENV_NAMES)
        return cls(bootstrap, properties, store, schema_registry_url=registry, schema_registry_user_info=auth)

    def _values(self) -> tuple[str | None, ...]:
        return (
            self.bootstrap_servers,
            self.kafka_properties,
            self.store_url,
            self.schema_registry_url,
            self.schema_registry_user_info,
        )

    def over(self, fallback: Connections) -> Connections:
        """These connections, `fallback`'s where these say nothing (the registry's URL and login together)."""
        registry = self if self.schema_registry_url else fallback
        return Connections(
            self.bootstrap_servers or fallback.bootstrap_servers,
            self.kafka_properties or fallback.kafka_properties,
            self.store_url or fallback.store_url,
            schema_registry_url=registry.schema_registry_url,
            schema_registry_user_info=registry.schema_registry_user_info,
        )

    def env(self) -> dict[str, str]:
        """The environment that gives a process started for the job (spark-submit) these connections."""
        return {name: v for name, v in zip(ENV_NAMES, self._values(), strict=True) if v}
