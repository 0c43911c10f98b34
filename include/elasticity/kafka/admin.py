"""Cluster metadata through the standard Kafka admin API, so the same calls run
against the embedded broker and Apache Kafka alike.

Every entry point probes the broker first: kafka-python alone needs about 30 s
to give up on a dead address (or on a listener that accepts and never answers),
and says little about which one it tried.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from kafka.admin import KafkaAdminClient, NewTopic

from elasticity.config import ConfigError, JobConfig
from elasticity.config.connections import Connections
from elasticity.config.services import BROKER, running_service
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka import clients
from elasticity.kafka.clients import Kafka, KafkaClientSettings, SystemClients, settings, settings_for

PROBE_TIMEOUT_S = 3.0


class BrokerUnreachable(ConnectionError):
    pass


class BrokerLoginRefused(BrokerUnreachable):
    """The broker answers but refuses the SASL login: no client of these settings will get further."""


class TopicError(RuntimeError):
    pass


def resolve_bootstrap(config: JobConfig | None = None, system: str = "kafka") -> str:
    """The deployment's servers (a connection, KAFKA_BOOTSTRAP_SERVERS), else the job's
    `systems.<system>.consumer.bootstrap.servers`, else the embedded broker if it runs."""
    found = config.bootstrap_servers(system) if config else Connections.from_env().bootstrap_servers
    if found:
        return found
    running = running_service(BROKER)
    if running:
        return running.address
    raise BrokerUnreachable(
        f"no Kafka broker for system {system!r}: set KAFKA_BOOTSTRAP_SERVERS or "
        f"systems.{system}.consumer.bootstrap.servers, or start the embedded one with `elasticity broker start`"
    )


def client_settings(config: JobConfig | None, system: str = "kafka", role: str = "consumer") -> KafkaClientSettings:
    """How a `role` client (consumer, producer, admin) of `system` connects: `resolve_bootstrap`'s servers and
    the job's `systems.<system>.<role>.*` Kafka properties, with the deployment's (KAFKA_CLIENT_PROPERTIES, a
    connection's) over them."""
    deployment = config.deployment if config else Connections.from_env()
    bootstrap = resolve_bootstrap(config, system)
    if role == "producer" and config is not None and not deployment.bootstrap_servers:
        bootstrap = config.get(f"systems.{system}.producer.bootstrap.servers") or bootstrap
    return settings_for(config.raw_map if config else {}, system, role, bootstrap=bootstrap, env=deployment.kafka_properties)


def system_clients(config: JobConfig | None, system: str = "kafka") -> SystemClients:
    return SystemClients(*(client_settings(config, system, role) for role in ("consumer", "producer", "admin")))


def tls_context(kafka: KafkaClientSettings) -> ssl.SSLContext:
    """The TLS context of the clients' settings (the probe speaks TLS as the clients do)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = kafka.get("ssl.endpoint.identification.algorithm", "https") == "https"
    if cafile := kafka.get("ssl.truststore.location"):
        ctx.load_verify_locations(cafile)
    else:
        ctx.load_default_certs()
    if keystore := kafka.get("ssl.keystore.location"):  # Kafka's PEM keystore: the key and its chain in one file
        ctx.load_cert_chain(keystore, keystore, kafka.get("ssl.key.password"))
    return ctx


_CORRELATION = 0x0E1A
_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 18, 17, 36  # Kafka's api keys
_LARGEST_ANSWER = 1 << 20  # a probe's answers are small: a bigger size is not a Kafka response


def _receive(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = b""
    while len(data) < size:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = sock.recv(size - len(data))
        except TimeoutError:
            raise TimeoutError("accepts connections but does not answer a Kafka request") from None
        if not chunk:
            raise ConnectionError("closed the connection without answering a Kafka request")
        data += chunk
    return data


def _request(sock: socket.socket, api: int, body: bytes, deadline: float, *, version: int = 0) -> bytes:
    """One round trip (request header v1, client id `elasticity`): the broker must answer with our correlation id
    before `deadline`; returns the response's body."""
    request = struct.pack(">hhih", api, version, _CORRELATION, 10) + b"elasticity" + body
    sock.sendall(struct.pack(">i", len(request)) + request)
    size, correlation = struct.unpack(">ii", _receive(sock, 8, deadline))
    if correlation != _CORRELATION or not 4 <= size <= _LARGEST_ANSWER:
        raise ConnectionError("answered with something that is not a Kafka response")
    return _receive(sock, size - 4, deadline)


def _ask_api_versions(sock: socket.socket, deadline: float) -> None:
    """ApiVersions v0, the first request every Kafka client sends; any broker answers it."""
    _request(sock, _API_VERSIONS, b"", deadline)


def _string(data: bytes, at: int) -> tuple[str, int]:
    (size,) = struct.unpack_from(">h", data, at)
    return data[at + 2 : at + 2 + max(size, 0)].decode(errors="replace"), at + 2 + max(size, 0)


_CHECK_LOGIN = "(check sasl.mechanism and the user and password of sasl.jaas.config)"


def _login(sock: socket.socket, kafka: KafkaClientSettings, deadline: float) -> None:
    """The SASL login the clients will make (kafka-python's own mechanism code: SaslHandshake v1, then
    SaslAuthenticate v0 rounds); BrokerLoginRefused names the broker, the mechanism and the user."""
    from kafka.net.sasl import get_sasl_mechanism

    options = kafka.kwargs()  # kafka-python's arguments, which its mechanisms take
    name, user = options["sasl_mechanism"], options["sasl_plain_username"]

    def refused(why: str) -> BrokerLoginRefused:
        return BrokerLoginRefused(f"Kafka broker at {kafka.bootstrap} refused the SASL {name} login as {user!r}: {why}")

    answer = _request(sock, _SASL_HANDSHAKE, struct.pack(">h", len(name)) + name.encode(), deadline, version=1)
    (error,), offered, at = struct.unpack_from(">h", answer), [], 6
    for _ in range(max(struct.unpack_from(">i", answer, 2)[0], 0)):
        mechanism, at = _string(answer, at)
        offered.append(mechanism)
    if error:
        raise refused(f"it offers SASL mechanisms {', '.join(offered) or 'none'}, not {name} (sasl.mechanism)")
    mechanism = get_sasl_mechanism(name)(**options)
    while not mechanism.is_done():
        token = mechanism.auth_bytes()
        answer = _request(sock, _SASL_AUTHENTICATE, struct.pack(">i", len(token)) + token, deadline)
        (error,) = struct.unpack_from(">h", answer)
        message, at = _string(answer, 2)
        if error:
            raise refused(f"{message or f'error {error}'} {_CHECK_LOGIN}")
        (size,) = struct.unpack_from(">i", answer, at)
        token = answer[at + 4 : at + 4 + max(size, 0)]
        if token.startswith(b"e="):  # SCRAM's server-error (RFC 5802), which some brokers send instead of an error code
            raise refused(f"{token[2:].decode(errors='replace')} {_CHECK_LOGIN}")
        try:
            mechanism.receive(token)
        except (ValueError, KeyError) as e:  # a server proof that does not check out, or a malformed message
            raise refused(f"its answer does not check out ({e!r})") from None


def probe(kafka: Kafka, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Fail fast, naming the address, unless one bootstrap server answers a Kafka request:
    a closed port, a dead host and a listener that never answers all fail within `timeout_s`.
    Over TLS the probe shakes hands as the clients will: a certificate they would refuse is named here. Over SASL
    it logs in as they will: a refused login raises BrokerLoginRefused at once (a client would retry for 30 s)."""
    kafka = settings(kafka)
    bootstrap, errors = kafka.bootstrap, []
    deadline = time.monotonic() + timeout_s
    try:
        context = tls_context(kafka) if kafka.tls else None
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"TLS settings for {bootstrap}: {e}") from None
    for server in (s.strip() for s in bootstrap.split(",") if s.strip()):
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection(
                (host or server, int(port or 9092)), timeout=max(0.1, deadline - time.monotonic())
            ) as raw:
                if context is None:
                    _ask_api_versions(raw, deadline)
                    if kafka.sasl:
                        _login(raw, kafka, deadline)
                    return
                try:
                    with context.wrap_socket(raw, server_hostname=host or server) as sock:
                        _ask_api_versions(sock, deadline)
                        if kafka.sasl:
                            _login(sock, kafka, deadline)
                        return
                except ssl.SSLError as e:
                    raise ConnectionError(f"TLS handshake failed: {e.reason or e}") from None
        except BrokerLoginRefused:
            raise  # the broker answered: another bootstrap server would refuse the same login
        except (OSError, ValueError, struct.error) as e:
            errors.append(f"{server}: {e}")
    raise BrokerUnreachable(
        f"Kafka broker unreachable at {bootstrap} within {timeout_s:.0f}s ({'; '.join(errors) or 'no address given'})"
    )


@contextmanager
def admin_client(kafka: Kafka) -> Iterator[KafkaAdminClient]:
    kafka = settings(kafka)
    probe(kafka)
    client = clients.admin(kafka)
    try:
        yield client
    finally:
        client.close()


def partition_counts(kafka: Kafka, streams: Iterable[SystemStream]) -> dict[SystemStream, int]:
    streams, bootstrap = list(streams), str(kafka)
    with admin_client(kafka) as admin:
        described = {t["name"]: t for t in admin.describe_topics([s.stream for s in streams])}
    counts = {}
    for s in streams:
        topic = described.get(s.stream)
        if topic is None or topic["error_code"] != 0 or not topic["partitions"]:
            raise TopicError(f"topic {s.stream!r} (input {s}) not found on {bootstrap}")
        counts[s] = len(topic["partitions"])
    return counts


def create_topic(kafka: Kafka, topic: str, partitions: int, configs: Mapping[str, str] | None = None) -> bool:
    """Create the topic if missing, with topic `configs` (`max.message.bytes`, `cleanup.policy`) over the
    broker's defaults; False when it already existed (its configs left as they are)."""
    bootstrap = str(kafka)
    with admin_client(kafka) as admin:
        if topic in admin.list_topics():
            return False
        result = admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=dict(configs or {}))], raise_errors=False)
    for t in result["topics"]:
        if t["error_code"] not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS (a concurrent creator)
            raise TopicError(f"cannot create topic {topic!r} on {bootstrap}: {t['error_message'] or t['error_code']}")
    return True
