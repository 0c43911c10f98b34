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
from elasticity.config.kafka_clients import KafkaClientSettings, SystemClients, settings_for
from elasticity.config.services import BROKER, running_service
from elasticity.jobmodel.model import SystemStream

PROBE_TIMEOUT_S = 3.0


class BrokerUnreachable(ConnectionError):
    pass


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


Kafka = KafkaClientSettings | str
"""Where a client connects and how: settings, or bare bootstrap servers (a plaintext cluster, Kafka's defaults)."""


def client_settings(config: JobConfig | None, system: str = "kafka", role: str = "consumer") -> KafkaClientSettings:
    """How a `role` client (consumer, producer, admin) of `system` connects: `resolve_bootstrap`'s servers and
    the job's `systems.<system>.<role>.*` Kafka properties, with the deployment's (KAFKA_CLIENT_PROPERTIES, a
    connection's) over them."""
    deployment = config.deployment if config else Connections.from_env()
    bootstrap = resolve_bootstrap(config, system)
    if role == "producer" and config is not None and not deployment.bootstrap_servers:
        bootstrap = config.get(f"systems.{system}.producer.bootstrap.servers") or bootstrap
    try:
        return settings_for(config.raw_map if config else {}, system, role, bootstrap=bootstrap, env=deployment.kafka_properties)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def system_clients(config: JobConfig | None, system: str = "kafka") -> SystemClients:
    return SystemClients(*(client_settings(config, system, role) for role in ("consumer", "producer", "admin")))


def settings(kafka: Kafka) -> KafkaClientSettings:
    return kafka if isinstance(kafka, KafkaClientSettings) else KafkaClientSettings(kafka)


def tls_context(kafka: KafkaClientSettings) -> ssl.SSLContext:
    """The TLS context kafka-python builds from the same arguments (the probe speaks TLS as the clients do)."""
    options = dict(kafka.options)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = options.get("ssl_check_hostname", True)
    if options.get("ssl_cafile"):
        ctx.load_verify_locations(options["ssl_cafile"])
    else:
        ctx.load_default_certs()
    if options.get("ssl_certfile"):
        ctx.load_cert_chain(options["ssl_certfile"], options.get("ssl_keyfile"), options.get("ssl_password"))
    return ctx


# ApiVersions v0 (api key 18), the first request every Kafka client sends; any broker answers it
_API_VERSIONS = struct.pack(">hhih", 18, 0, 0x0E1A, 10) + b"elasticity"


def _ask_api_versions(sock: socket.socket, deadline: float) -> None:
    """One ApiVersions round trip: the broker must answer (with our correlation id) before `deadline`."""
    sock.sendall(struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS)
    head = b""
    while len(head) < 8:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = sock.recv(8 - len(head))
        except TimeoutError:
            raise TimeoutError("accepts connections but does not answer a Kafka request") from None
        if not chunk:
            raise ConnectionError("closed the connection without answering a Kafka request")
        head += chunk
    if struct.unpack(">ii", head)[1] != 0x0E1A:
        raise ConnectionError("answered with something that is not a Kafka response")


def probe(kafka: Kafka, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Fail fast, naming the address, unless one bootstrap server answers a Kafka request:
    a closed port, a dead host and a listener that never answers all fail within `timeout_s`.
    Over TLS the probe shakes hands as the clients will: a certificate they would refuse is named here."""
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
                    return
                try:
                    with context.wrap_socket(raw, server_hostname=host or server) as sock:
                        _ask_api_versions(sock, deadline)
                        return
                except ssl.SSLError as e:
                    raise ConnectionError(f"TLS handshake failed: {e.reason or e}") from None
        except (OSError, ValueError) as e:
            errors.append(f"{server}: {e}")
    raise BrokerUnreachable(
        f"Kafka broker unreachable at {bootstrap} within {timeout_s:.0f}s ({'; '.join(errors) or 'no address given'})"
    )


@contextmanager
def admin_client(kafka: Kafka) -> Iterator[KafkaAdminClient]:
    kafka = settings(kafka)
    probe(kafka)
    client = KafkaAdminClient(**kafka.kwargs(request_timeout_ms=10_000, client_id="elasticity-admin"))
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
