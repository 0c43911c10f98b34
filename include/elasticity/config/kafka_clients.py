"""Kafka client settings as Samza passes them: `systems.<system>.consumer.*`, `producer.*` and `admin.*`
hold Kafka's own property names, which become kafka-python's keyword arguments here, for every client the
project opens (reads, lag probe, admin, changelog, side inputs, producers).

A property kafka-python cannot honour (a JKS store, GSSAPI, an unknown name) is refused naming the key and
what is supported, never dropped. Secrets (`ssl.key.password`, `sasl.jaas.config`) never leave this module
in clear: `KafkaClientSettings`' repr, the config's repr and stored job model, and every error mask them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elasticity.config.errors import ConfigError
from elasticity.config.parsers import Parser, Refused, choice, int_range

ROLES = ("consumer", "producer", "admin")
"""Client roles, as Samza names their prefixes. The admin client takes the consumer's properties
(Samza builds its admin client from the consumer config), then its own `admin.*`."""

MASK = "***"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


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
    """One Kafka client property: its kafka-python argument (None: read by another property's mapping), the roles
    it applies to, and whether its value is a secret."""

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
        arg="group_id",
        parser=Parser(_text, "a group id"),
        roles=_CONSUMER,
        doc="Consumer group (partitions are assigned, not subscribed; no offsets are committed to it).",
    ),
    KafkaProperty(
        name="auto.offset.reset",
        arg="auto_offset_reset",
        parser=Parser(_offset_reset, "earliest, latest (or smallest, largest)"),
        roles=_CONSUMER,
        doc="Where a read starts when its offset is out of range.",
    ),
    KafkaProperty(
        name="fetch.min.bytes", arg="fetch_min_bytes", parser=int_range(1), roles=_CONSUMER, doc="Least data a fetch waits for."
    ),
    KafkaProperty(
        name="fetch.max.bytes", arg="fetch_max_bytes", parser=_BYTES, roles=_CONSUMER, doc="Most data one fetch returns."
    ),
    KafkaProperty(
        name="fetch.max.wait.ms",
        arg="fetch_max_wait_ms",
        parser=_MS,
        roles=_CONSUMER,
        doc="Longest a fetch waits for fetch.min.bytes.",
    ),
    KafkaProperty(
        name="max.partition.fetch.bytes",
        arg="max_partition_fetch_bytes",
        parser=_BYTES,
        roles=_CONSUMER,
        doc="Most data a fetch returns per partition.",
    ),
    KafkaProperty(
        name="max.poll.records",
        arg="max_poll_records",
        parser=int_range(1),
        roles=_CONSUMER,
        doc="Most records one poll returns.",
    ),
    KafkaProperty(
        name="session.timeout.ms", arg="session_timeout_ms", parser=int_range(1), roles=_CONSUMER, doc="Group session timeout."
    ),
    KafkaProperty(
        name="heartbeat.interval.ms",
        arg="heartbeat_interval_ms",
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
    KafkaProperty(name="check.crcs", arg="check_crcs", parser=_BOOLEAN, roles=_CONSUMER, doc="Check each record batch's CRC."),
    KafkaProperty(
        name="client.rack",
        arg="client_rack",
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
SECRET_ARGS = frozenset({"ssl_password", "sasl_plain_password"})

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


_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\s+(?P<options>.*?)\s*;\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def parse_jaas(text: str, mechanism: str) -> tuple[str, str]:
    """(username, password) of a JAAS line, `<LoginModule> required username="..." password="...";`.
    A ValueError never quotes the line (it holds the password)."""
    m = _JAAS.match(text)
    if m is None:
        raise ValueError('expected `<LoginModule> required username="..." password="...";`')
    module, options, rest = m["module"], {}, m["options"]
    while rest.strip():
        o = _JAAS_OPTION.match(rest)
        if o is None:
            raise ValueError('expected options as name="value" separated by spaces')
        options[o[1]] = re.sub(r"\\(.)", r"\1", o[2]) if o[2] is not None else o[3]
        rest = rest[o.end() :]
    if module != _LOGIN_MODULES[mechanism]:
        raise ValueError(f"sasl.mechanism={mechanism} logs in with {_LOGIN_MODULES[mechanism]}, not {module}")
    missing = [o for o in ("username", "password") if not options.get(o)]
    if missing:
        raise ValueError(f"the login module needs {' and '.join(missing)}")
    return options["username"], options["password"]


def jaas_line(mechanism: str, username: str, password: str) -> str:
    """The JAAS line Kafka expects for a SASL login (e.g. from an Airflow connection's login and password)."""

    def quote(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    module = _LOGIN_MODULES.get(mechanism.strip().upper(), _LOGIN_MODULES["PLAIN"])
    return f"{module} required username={quote(username)} password={quote(password)};"


def _same(value: Any) -> Any:
    return value


_LIBRDKAFKA: dict[str, tuple[str | None, Any]] = {  # a client's kafka-python argument -> librdkafka's property
    "security_protocol": ("security.protocol", _same),
    "ssl_cafile": ("ssl.ca.location", _same),
    "ssl_certfile": ("ssl.certificate.location", _same),
    "ssl_keyfile": ("ssl.key.location", _same),
    "ssl_password": ("ssl.key.password", _same),
    "ssl_check_hostname": ("ssl.endpoint.identification.algorithm", lambda check: "https" if check else "none"),
    "sasl_mechanism": ("sasl.mechanisms", _same),
    "sasl_plain_username": ("sasl.username", _same),  # kafka-python's name for any mechanism's user
    "sasl_plain_password": ("sasl.password", _same),
    "client_id": ("client.id", _same),
    "request_timeout_ms": ("socket.timeout.ms", _same),
    "connections_max_idle_ms": ("connections.max.idle.ms", _same),
    "metadata_max_age_ms": ("metadata.max.age.ms", _same),
    "reconnect_backoff_ms": ("reconnect.backoff.ms", _same),
    "reconnect_backoff_max_ms": ("reconnect.backoff.max.ms", _same),
    "retry_backoff_ms": ("retry.backoff.ms", _same),
    "receive_buffer_bytes": ("socket.receive.buffer.bytes", lambda n: max(n, 0)),  # -1 and 0: the OS default
    "send_buffer_bytes": ("socket.send.buffer.bytes", lambda n: max(n, 0)),
    "group_id": ("group.id", _same),
    "auto_offset_reset": ("auto.offset.reset", _same),
    "fetch_min_bytes": ("fetch.min.bytes", _same),
    "fetch_max_bytes": ("fetch.max.bytes", _same),
    "fetch_max_wait_ms": ("fetch.wait.max.ms", _same),
    "max_partition_fetch_bytes": ("max.partition.fetch.bytes", _same),
    "isolation_level": ("isolation.level", _same),
    "check_crcs": ("check.crcs", _same),
    "client_rack": ("client.rack", _same),
    # group membership and poll sizes: nothing an assign-and-seek read depends on
    "max_poll_records": (None, _same),
    "session_timeout_ms": (None, _same),
    "heartbeat_interval_ms": (None, _same),
    # a producer's
    "acks": ("acks", str),
    "linger_ms": ("linger.ms", _same),
    "batch_size": ("batch.size", _same),
    "compression_type": ("compression.type", lambda c: c or "none"),
    "max_request_size": ("message.max.bytes", _same),
    "retries": ("message.send.max.retries", _same),
    "delivery_timeout_ms": ("delivery.timeout.ms", _same),
    "max_block_ms": (None, _same),  # librdkafka's produce() does not block: a full queue raises BufferError
    "enable_idempotence": ("enable.idempotence", _same),
    "max_in_flight_requests_per_connection": ("max.in.flight.requests.per.connection", _same),
}


@dataclass(frozen=True)
class KafkaClientSettings:
    """What one Kafka client is opened with: the bootstrap servers and kafka-python's keyword arguments
    (sorted, so the settings are hashable and picklable; Spark ships them to the workers). Its repr masks secrets;
    its str is the bootstrap address, which is what errors name."""

    bootstrap: str
    options: tuple[tuple[str, Any], ...] = ()

    def kwargs(self, **defaults: Any) -> dict[str, Any]:
        """The client's keyword arguments: the project's defaults for this client, then the configured ones."""
        return {**defaults, **dict(self.options), "bootstrap_servers": self.bootstrap}

    @property
    def tls(self) -> bool:
        return dict(self.options).get("security_protocol", "PLAINTEXT") in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return dict(self.options).get("security_protocol", "PLAINTEXT").startswith("SASL_")

    def librdkafka(self, **defaults: Any) -> dict[str, Any]:
        """The same client as librdkafka (confluent-kafka) properties, for a reader that assigns and seeks or a
        transactional producer: the project's defaults, then the configured ones. Every option has a counterpart
        (the SASL login too: librdkafka does PLAIN and SCRAM), so a job's Kafka outputs are exactly-once over SASL."""
        out: dict[str, Any] = {**defaults, "bootstrap.servers": self.bootstrap}
        for arg, value in self.options:
            name, convert = _LIBRDKAFKA[arg]
            if name is not None:
                out[name] = convert(value)
        return out

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={MASK if k in SECRET_ARGS else repr(v)}" for k, v in self.options)
        return f"KafkaClientSettings({self.bootstrap!r}{', ' + opts if opts else ''})"

    def __str__(self) -> str:
        return self.bootstrap


@dataclass(frozen=True)
class SystemClients:
    """The settings of the three clients a component of one system opens (the changelog: read, write, create)."""

    consumer: KafkaClientSettings
    producer: KafkaClientSettings
    admin: KafkaClientSettings

    def __str__(self) -> str:
        return self.consumer.bootstrap


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


def client_options(properties: Mapping[str, str], where: str, role: str = "consumer") -> tuple[tuple[str, Any], ...]:
    """kafka-python's keyword arguments for Kafka `properties` of a `role` client; a ValueError names every
    problem (each property as `<where><property>`, secrets masked)."""
    args, errors = _options(properties, where, role)
    if errors:
        raise ValueError("; ".join(errors))
    return args


def _options(properties: Mapping[str, str], where: str, role: str) -> tuple[tuple[tuple[str, Any], ...], list[str]]:
    args: dict[str, Any] = {}
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
        if known.arg is not None:
            args[known.arg] = value
    protocol = args.get("security_protocol", "PLAINTEXT")
    for prop in ("truststore", "keystore"):
        if f"ssl.{prop}.location" in properties and properties.get(f"ssl.{prop}.type", "").strip().upper() != "PEM":
            errors.append(
                f"{where}ssl.{prop}.location: Kafka reads it as ssl.{prop}.type (default JKS); "
                f"set {where}ssl.{prop}.type=PEM with a PEM file (kafka-python reads PEM only)"
            )
    if "ssl_certfile" in args:
        args["ssl_keyfile"] = args["ssl_certfile"]  # Kafka's PEM keystore holds the key and its chain in one file
    mechanism, jaas = args.get("sasl_mechanism"), properties.get("sasl.jaas.config")
    if protocol.startswith("SASL_"):
        if jaas is None:
            errors.append(f"{where}security.protocol={protocol}: expected {where}sasl.jaas.config with a username and password")
        else:
            mechanism = args.setdefault("sasl_mechanism", "PLAIN")  # Kafka's default mechanism
            try:
                args["sasl_plain_username"], args["sasl_plain_password"] = parse_jaas(jaas, mechanism)
            except ValueError as e:
                errors.append(f"{where}sasl.jaas.config={MASK}: {e}")
    elif mechanism is not None or jaas is not None:
        sasl = " and ".join(f"{where}{p}" for p in ("sasl.mechanism", "sasl.jaas.config") if p in properties)
        default = " (the default)" if "security.protocol" not in properties else ""
        errors.append(f"{sasl}: SASL needs security.protocol SASL_SSL or SASL_PLAINTEXT, not {protocol}{default}")
    return tuple(sorted(args.items())), errors


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


def settings_for(
    props: Mapping[str, str], system: str, role: str, *, bootstrap: str, env: str | None = None
) -> KafkaClientSettings:
    """The settings of a `role` client of `system` from flat properties (a job config's), with `env`
    (ENV_PROPERTIES' text) over them; a ConfigError names every problem, secrets masked."""
    try:
        properties = role_properties(props, system, role) | env_properties(env, role)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    try:
        return KafkaClientSettings(bootstrap, client_options(properties, f"systems.{system}.{role}.", role))
    except ValueError as e:
        raise ConfigError(f"{e} ({ENV_PROPERTIES} taken over the job's)" if env else str(e)) from None
