"""Kafka client properties as Samza passes them: `systems.<system>.consumer.*`, `producer.*` and `admin.*`
hold Kafka's own property names, checked here, in one place, for every client the project opens; the clients
are made with them, still under Kafka's names, in `elasticity.kafka.clients`.

A property the clients cannot honour (a JKS store, GSSAPI, an unknown name) is refused naming the key and
what is supported, never dropped. Secrets (`ssl.key.password`, `sasl.jaas.config`) never leave in clear: the
client settings' repr, the config's repr and stored job model, and every error mask them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elasticity.config.errors import ConfigError
from elasticity.config.jaas import SASL_MECHANISMS, parse_jaas
from elasticity.config.parsers import Parser, Refused, choice, int_range

ROLES = ("consumer", "producer", "admin")
"""Client roles, as Samza names their prefixes. The admin client takes the consumer's properties
(Samza builds its admin client from the consumer config), then its own `admin.*`."""

MASK = "***"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError
    return text.strip()


def _pem_only(what: str) -> Parser[str]:
    def parse(text: str) -> str:
        if text.strip().upper() != "PEM":
            raise Refused(f"kafka-python reads PEM files only; convert a JKS or PKCS12 {what} with keytool and openssl")
        return "PEM"

    return Parser(parse, "PEM")


def _mechanism(text: str) -> str:
    name = text.strip().upper()
    if name not in SASL_MECHANISMS:
        why = {"GSSAPI": "Kerberos is not supported here", "OAUTHBEARER": "it needs a token callback, a Java class here"}
        raise Refused(why.get(name, "kafka-python knows no such mechanism"))
    return name


def _endpoint_identification(text: str) -> bool:
    if text.strip().lower() not in ("", "https"):
        raise ValueError
    return text.strip().lower() == "https"


def _boolean(text: str) -> bool:
    return {"true": True, "false": False}[text.strip().lower()]


def _offset_reset(text: str) -> str:
    return {"earliest": "earliest", "smallest": "earliest", "latest": "latest", "largest": "latest"}[text.strip().lower()]


_ENDPOINT = Parser(_endpoint_identification, "https (check the broker's host name) or empty (do not)")
_BOOLEAN = Parser(_boolean, "true or false")
_BYTES, _MS = int_range(0), int_range(0)


@dataclass(frozen=True, kw_only=True)
class KafkaProperty:
    """One Kafka client property: the roles it applies to, whether its value is a secret, and its kafka-python
    argument (None: kafka-python's clients read it through another property, or never use it: they read no
    records, so a consumer's fetch properties are librdkafka's alone)."""

    name: str
    arg: str | None
    parser: Parser[Any]
    roles: tuple[str, ...]
    doc: str
    secret: bool = False


_ALL, _CONSUMER, _PRODUCER = ROLES, ("consumer",), ("producer",)
PROPERTIES: tuple[KafkaProperty, ...] = (
    KafkaProperty(
        name="security.protocol",
        arg="security_protocol",
        parser=choice({p: p for p in SECURITY_PROTOCOLS}),
        roles=_ALL,
        doc="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    ),
    KafkaProperty(
        name="ssl.truststore.type",
        arg=None,
        parser=_pem_only("truststore"),
        roles=_ALL,
        doc="PEM (required with a truststore location).",
    ),
    KafkaProperty(
        name="ssl.truststore.location",
        arg="ssl_cafile",
        parser=Parser(_text, "a PEM file of CA certificates"),
        roles=_ALL,
        doc="CA certificates (PEM) the broker's certificate must chain to; default: the system's.",
    ),
    KafkaProperty(
        name="ssl.keystore.type",
        arg=None,
        parser=_pem_only("keystore"),
        roles=_ALL,
        doc="PEM (required with a keystore location).",
    ),
    KafkaProperty(
        name="ssl.keystore.location",
        arg="ssl_certfile",
        parser=Parser(_text, "a PEM file holding the client's key and certificate chain"),
        roles=_ALL,
        doc="The client's private key and certificate chain (PEM), for mutual TLS.",
    ),
    KafkaProperty(
        name="ssl.key.password",
        arg="ssl_password",
        parser=Parser(_text, "the password of the keystore's private key"),
        roles=_ALL,
        doc="Password of the keystore's private key.",
        secret=True,
    ),
    KafkaProperty(
        name="ssl.endpoint.identification.algorithm",
        arg="ssl_check_hostname",
        parser=_ENDPOINT,
        roles=_ALL,
        doc="https (Kafka's default: check the broker's host name) or empty.",
    ),
    KafkaProperty(
        name="sasl.mechanism",
        arg="sasl_mechanism",
        parser=Parser(_mechanism, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
        roles=_ALL,
        doc="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.",
    ),
    KafkaProperty(
        name="sasl.jaas.config",
        arg=None,
        parser=Parser(_text, "a JAAS login module line"),
        roles=_ALL,
        doc="The login module with username and password (PlainLoginModule or ScramLoginModule).",
        secret=True,
    ),
    KafkaProperty(
        name="client.id",
        arg="client_id",
        parser=Parser(_text, "a client id"),
        roles=_ALL,
        doc="Client id in the broker's logs and quotas.",
    ),
    KafkaProperty(
        name="request.timeout.ms",
        arg="request_timeout_ms",
        parser=int_range(1),
        roles=_ALL,
        doc="How long a request may wait for its answer.",
    ),
    KafkaProperty(
        name="connections.max.idle.ms",
        arg="connections_max_idle_ms",
        parser=_MS,
        roles=_ALL,
        doc="Idle connections close after this.",
    ),
    KafkaProperty(
        name="metadata.max.age.ms",
        arg="metadata_max_age_ms",
        parser=_MS,
        roles=_ALL,
        doc="Metadata is refreshed at least this often.",
    ),
    KafkaProperty(
        name="reconnect.backoff.ms",
        arg="reconnect_backoff_ms",
        parser=_MS,
        roles=_ALL,
        doc="Wait before reconnecting to a broker.",
    ),
    KafkaProperty(
        name="reconnect.backoff.max.ms",
        arg="reconnect_backoff_max_ms",
        parser=_MS,
        roles=_ALL,
        doc="Longest wait before reconnecting.",
    ),
    KafkaProperty(
        name="retry.backoff.ms", arg="retry_backoff_ms", parser=_MS, roles=_ALL, doc="Wait before retrying a failed request."
    ),
    KafkaProperty(
        name="receive.buffer.bytes",
        arg="receive_buffer_bytes",
        parser=int_range(-1),
        roles=_ALL,
        doc="TCP receive buffer (-1: the OS default).",
    ),
    KafkaProperty(
        name="send.buffer.bytes",
        arg="send_buffer_bytes",
        parser=int_range(-1),
        roles=_ALL,
        doc="TCP send buffer (-1: the OS default).",
    ),
    KafkaProperty(
        name="group.id",
        arg=None,
        parser=Parser(_text, "a group id"),
        roles=_CONSUMER,
        doc="Consumer group (partitions are assigned, not subscribed; no offsets are committed to it).",
    ),
    KafkaProperty(
        name="auto.offset.reset",
        arg=None,
        parser=Parser(_offset_reset, "earliest, latest (or smallest, largest)"),
        roles=_CONSUMER,
        doc="Where a read starts when its offset is out of range.",
    ),
    KafkaProperty(name="fetch.min.bytes", arg=None, parser=int_range(1), roles=_CONSUMER, doc="Least data a fetch waits for."),
    KafkaProperty(name="fetch.max.bytes", arg=None, parser=_BYTES, roles=_CONSUMER, doc="Most data one fetch returns."),
    KafkaProperty(
        name="fetch.max.wait.ms",
        arg=None,
        parser=_MS,
        roles=_CONSUMER,
        doc="Longest a fetch waits for fetch.min.bytes.",
    ),
    KafkaProperty(
        name="max.partition.fetch.bytes",
        arg=None,
        parser=_BYTES,
        roles=_CONSUMER,
        doc="Most data a fetch returns per partition.",
    ),
    KafkaProperty(
        name="max.poll.records",
        arg=None,
        parser=int_range(1),
        roles=_CONSUMER,
        doc="Most records one poll returns.",
    ),
    KafkaProperty(name="session.timeout.ms", arg=None, parser=int_range(1), roles=_CONSUMER, doc="Group session timeout."),
    KafkaProperty(
        name="heartbeat.interval.ms",
        arg=None,
        parser=int_range(1),
        roles=_CONSUMER,
        doc="Group heartbeat interval.",
    ),
    KafkaProperty(
        name="isolation.level",
        arg="isolation_level",
        parser=choice({"read_uncommitted": "read_uncommitted", "read_committed": "read_committed"}),
        roles=_CONSUMER,
        doc="read_uncommitted or read_committed (transactional producers).",
    ),
    KafkaProperty(name="check.crcs", arg=None, parser=_BOOLEAN, roles=_CONSUMER, doc="Check each record batch's CRC."),
    KafkaProperty(
        name="client.rack",
        arg=None,
        parser=Parser(_text, "a rack id"),
        roles=_CONSUMER,
        doc="Rack of the client (fetch from the nearest replica).",
    ),
    KafkaProperty(
        name="acks",
        arg="acks",
        parser=choice({"0": 0, "1": 1, "all": "all", "-1": "all"}),
        roles=_PRODUCER,
        doc="0, 1 or all (-1).",
    ),
    KafkaProperty(
        name="linger.ms", arg="linger_ms", parser=_MS, roles=_PRODUCER, doc="Wait for more records before sending a batch."
    ),
    KafkaProperty(name="batch.size", arg="batch_size", parser=_BYTES, roles=_PRODUCER, doc="Largest record batch per partition."),
    KafkaProperty(
        name="compression.type",
        arg="compression_type",
        parser=choice({c: (None if c == "none" else c) for c in ("none", "gzip", "snappy", "lz4", "zstd")}),
        roles=_PRODUCER,
        doc="none, gzip, snappy, lz4 or zstd.",
    ),
    KafkaProperty(
        name="max.request.size",
        arg="max_request_size",
        parser=int_range(1),
        roles=_PRODUCER,
        doc="Largest request the producer sends.",
    ),
    KafkaProperty(name="retries", arg="retries", parser=int_range(0), roles=_PRODUCER, doc="Retries of a failed send."),
    KafkaProperty(
        name="delivery.timeout.ms",
        arg="delivery_timeout_ms",
        parser=int_range(1),
        roles=_PRODUCER,
        doc="Longest a send may take, retries included.",
    ),
    KafkaProperty(
        name="max.block.ms",
        arg="max_block_ms",
        parser=_MS,
        roles=_PRODUCER,
        doc="Longest send() blocks on a full buffer or metadata.",
    ),
    KafkaProperty(
        name="enable.idempotence", arg="enable_idempotence", parser=_BOOLEAN, roles=_PRODUCER, doc="Idempotent producer."
    ),
    KafkaProperty(
        name="max.in.flight.requests.per.connection",
        arg="max_in_flight_requests_per_connection",
        parser=int_range(1),
        roles=_PRODUCER,
        doc="Unanswered requests per connection.",
    ),
)
_BY_NAME = {p.name: p for p in PROPERTIES}
SECRET_PROPERTIES = frozenset(p.name for p in PROPERTIES if p.secret)

UNSUPPORTED = {
    "bootstrap.servers": "the admin client connects to systems.<system>.consumer.bootstrap.servers",
    "ssl.truststore.password": "a PEM truststore has no password; give ssl.truststore.type=PEM",
    "ssl.keystore.password": "a PEM keystore has no store password; its key's is ssl.key.password",
    "ssl.truststore.certificates": "give the certificates as a file, ssl.truststore.location",
    "ssl.keystore.key": "give the key and chain as a file, ssl.keystore.location",
    "ssl.keystore.certificate.chain": "give the key and chain as a file, ssl.keystore.location",
    "sasl.kerberos.service.name": "GSSAPI (Kerberos) is not supported; use PLAIN or SCRAM",
    "sasl.login.callback.handler.class": "Java callback classes cannot run here; use PLAIN or SCRAM with sasl.jaas.config",
    "sasl.client.callback.handler.class": "Java callback classes cannot run here; use PLAIN or SCRAM with sasl.jaas.config",
    "enable.auto.commit": "the project commits offsets to its own checkpoints, never to Kafka",
    "key.deserializer": "keys are read as bytes; systems.<system>.samza.key.serde decodes them",
    "value.deserializer": "values are read as bytes; systems.<system>.samza.msg.serde decodes them",
    "key.serializer": "keys are written as bytes; systems.<system>.samza.key.serde encodes them",
    "value.serializer": "values are written as bytes; systems.<system>.samza.msg.serde encodes them",
}


def client_prefix(name: str) -> tuple[str, str, str] | None:
    """(system, role, property) of a `systems.<system>.<role>.<property>` key, else None."""
    m = re.match(r"^systems\.([^.]+)\.(consumer|producer|admin)\.(.+)$", name)
    return (m[1], m[2], m[3]) if m else None


def _refusal(role: str, prop: str) -> str:
    known = _BY_NAME.get(prop)
    if known is not None:
        return f"Kafka property {prop!r} applies to {' and '.join(known.roles)} clients, not to the {role}"
    why = UNSUPPORTED.get(prop, "kafka-python has no such setting here")
    supported = [*(["bootstrap.servers"] if role != "admin" else []), *(p.name for p in PROPERTIES if role in p.roles)]
    return f"Kafka {role} property {prop!r} is not supported ({why}); supported: {', '.join(supported)}"


def property_problem(name: str) -> str | None:
    """Why a `systems.<s>.<role>.<property>` key that no declaration matches is refused (None: not such a key)."""
    parts = client_prefix(name)
    if parts is None:
        return None
    return f"{name}: {_refusal(parts[1], parts[2])}"


def shown(name: str, text: str) -> str:
    """A key's value as errors, reprs and pages may show it: a secret's is masked."""
    parts = client_prefix(name)
    return MASK if parts is not None and parts[2] in SECRET_PROPERTIES else text


def role_properties(props: Mapping[str, str], system: str, role: str) -> dict[str, str]:
    """The Kafka properties a `role` client of `system` is given: Samza's `systems.<system>.<role>.*`;
    the admin client takes the consumer's that apply to it first. bootstrap.servers is not among them."""
    out: dict[str, str] = {}
    for r in ("consumer", "admin") if role == "admin" else (role,):
        prefix = f"systems.{system}.{r}."
        for k, v in props.items():
            prop = k[len(prefix) :]
            if (
                k.startswith(prefix)
                and prop != "bootstrap.servers"
                and (r == role or (prop in _BY_NAME and role in _BY_NAME[prop].roles))
            ):
                out[prop] = v
    return out


def client_properties(properties: Mapping[str, str], where: str, role: str = "consumer") -> tuple[tuple[str, str], ...]:
    """The Kafka `properties` of a `role` client, checked and as Kafka names them (each value stripped, sorted);
    a ValueError names every problem (each property as `<where><property>`, secrets masked)."""
    checked, errors = _options(properties, where, role)
    if errors:
        raise ValueError("; ".join(errors))
    return checked


def _options(properties: Mapping[str, str], where: str, role: str) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    checked: dict[str, str] = {}
    errors: list[str] = []
    for prop, text in sorted(properties.items()):
        known = _BY_NAME.get(prop)
        if known is None or role not in known.roles:
            errors.append(f"{where}{prop}: {_refusal(role, prop)}")
            continue
        try:
            value = known.parser(text)
        except ValueError as e:
            errors.append(f"{where}{prop}={MASK if known.secret else repr(text)}: expected {e}")
            continue
        checked[prop] = value if isinstance(value, str) else text.strip().lower()  # Kafka's spelling of the value
    protocol = checked.get("security.protocol", "PLAINTEXT")
    for prop in ("truststore", "keystore"):
        if f"ssl.{prop}.location" in properties and properties.get(f"ssl.{prop}.type", "").strip().upper() != "PEM":
            errors.append(
                f"{where}ssl.{prop}.location: Kafka reads it as ssl.{prop}.type (default JKS); "
                f"set {where}ssl.{prop}.type=PEM with a PEM file (kafka-python reads PEM only)"
            )
    mechanism, jaas = checked.get("sasl.mechanism"), properties.get("sasl.jaas.config")
    if protocol.startswith("SASL_"):
        if jaas is None:
            errors.append(f"{where}security.protocol={protocol}: expected {where}sasl.jaas.config with a username and password")
        else:
            mechanism = checked.setdefault("sasl.mechanism", "PLAIN")  # Kafka's default mechanism (librdkafka's is GSSAPI)
            try:
                parse_jaas(jaas, mechanism)
            except ValueError as e:
                errors.append(f"{where}sasl.jaas.config={MASK}: {e}")
    elif mechanism is not None or jaas is not None:
        sasl = " and ".join(f"{where}{p}" for p in ("sasl.mechanism", "sasl.jaas.config") if p in properties)
        default = " (the default)" if "security.protocol" not in properties else ""
        errors.append(f"{sasl}: SASL needs security.protocol SASL_SSL or SASL_PLAINTEXT, not {protocol}{default}")
    return tuple(sorted(checked.items())), errors


def problems(props: Mapping[str, str]) -> list[str]:
    """What the Kafka properties of flat config `props` cannot be, client by client, beyond each property's own
    value (which its key's parser checks): a store type, SASL without its login, a JAAS line that does not parse.
    The admin client is checked when it has `admin.*` keys of its own (else it is the consumer, checked already)."""
    out: list[str] = []
    groups = sorted({(parts[0], parts[1]) for name in props if (parts := client_prefix(name))})
    for system, role in groups:
        properties = role_properties(props, system, role)
        if all(p in _BY_NAME and role in _BY_NAME[p].roles and _parses(p, t) for p, t in properties.items()):
            out += [e for e in _options(properties, f"systems.{system}.{role}.", role)[1] if e not in out]
    return out


def _parses(prop: str, text: str) -> bool:
    try:
        _BY_NAME[prop].parser(text)
        return True
    except ValueError:
        return False


ENV_PROPERTIES = "KAFKA_CLIENT_PROPERTIES"
"""A JSON object of Kafka properties for every client of every system, over the job's own (as
KAFKA_BOOTSTRAP_SERVERS is over its bootstrap): how an Airflow connection's settings reach the batch."""


def env_properties(text: str | None, role: str) -> dict[str, str]:
    """The properties of `ENV_PROPERTIES` (its text) that apply to a `role` client; a ValueError names a bad one."""
    if not text:
        return {}
    try:
        found = json.loads(text)
        if not isinstance(found, dict):
            raise ValueError
    except ValueError:
        raise ValueError(f"{ENV_PROPERTIES}: expected a JSON object of Kafka properties") from None
    unknown = sorted(p for p in found if p not in _BY_NAME)
    if unknown:
        raise ValueError(f"{ENV_PROPERTIES}: {'; '.join(_refusal(role, p) for p in unknown)}")
    return {p: str(v) for p, v in found.items() if role in _BY_NAME[p].roles}


def checked_properties(
    props: Mapping[str, str], system: str, role: str, *, env: str | None = None
) -> tuple[tuple[str, str], ...]:
    """The Kafka properties of a `role` client of `system` from flat properties (a job config's), with `env`
    (ENV_PROPERTIES' text) over them, checked; a ConfigError names every problem, secrets masked."""
    try:
        properties = role_properties(props, system, role) | env_properties(env, role)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    try:
        return client_properties(properties, f"systems.{system}.{role}.", role)
    except ValueError as e:
        raise ConfigError(f"{e} ({ENV_PROPERTIES} taken over the job's)" if env else str(e)) from None
