"""A broker behind TLS, for the tests: the embedded broker in a network namespace of the test's own, and a
TLS-terminating proxy on the same address in the test's namespace.

The broker advertises the address it listens on (127.0.0.1:P). Inside its namespace that is its own
loopback; in the test's namespace the proxy listens there, so every client, whether given the bootstrap or
sent on by the broker's metadata, reaches the broker only through TLS. The proxy opens its upstream
connections from a thread that has entered the broker's namespace (setns), so nothing else can reach the
plaintext listener. Certificates are made at test time with the `cryptography` package.
"""

from __future__ import annotations

import asyncio
import ctypes
import datetime
import ipaddress
import os
import socket
import ssl
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from elasticity.local.broker import _binary, free_port

CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA the broker's certificate chains to (PEM)
    other_ca: Path  # a CA that signed nothing here: a client trusting only it must refuse the broker
    server_cert: Path
    server_key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_certificates(folder: Path) -> Certificates:
    """A CA, a broker certificate it signs for 127.0.0.1 and localhost, and an unrelated CA."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca = _ca("elasticity test CA")
    _, other = _ca("some other CA")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("broker"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    out = Certificates(folder / "ca.pem", folder / "other-ca.pem", folder / "broker.pem", folder / "broker.key")
    out.ca.write_bytes(_pem(ca))
    out.other_ca.write_bytes(_pem(other))
    out.server_cert.write_bytes(_pem(cert))
    out.server_key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return out


def _enter_namespace(path: str) -> None:
    """Move the calling thread into the network namespace at `path` (sockets it opens live there)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path})")
    finally:
        os.close(fd)


class TlsBroker:
    """The embedded broker reachable only over TLS at `bootstrap` (127.0.0.1:P): `start()`, then `stop()`."""

    def __init__(self, folder: Path, certificates: Certificates) -> None:
        self.folder, self.certificates = folder, certificates
        self.namespace = f"elasticity-tls-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.connections = 0  # client connections the proxy accepted (TLS handshakes done)
        self._broker: subprocess.Popen[bytes] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tls-proxy", daemon=True)
        self._upstream = ThreadPoolExecutor(
            1, thread_name_prefix="tls-proxy-upstream", initializer=_enter_namespace, initargs=(f"/run/netns/{self.namespace}",)
        )

    def start(self, timeout_s: float = 30.0) -> TlsBroker:
        subprocess.run(["ip", "netns", "add", self.namespace], check=True)
        subprocess.run(["ip", "netns", "exec", self.namespace, "ip", "link", "set", "lo", "up"], check=True)
        log = open(self.folder / "broker.log", "wb")  # noqa: SIM115 (the broker's for its life)
        self._broker = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace, str(_binary()), "start", "--only", "kafka", "--kafka-port", str(self.port)]
            + ["--data-dir", str(self.folder / "data"), "--host", "127.0.0.1"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout_s
        while True:  # the broker listens inside its namespace
            try:
                self._upstream.submit(self._connect).result().close()
                break
            except OSError:
                if self._broker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"broker in {self.namespace} did not start: {(self.folder / 'broker.log').read_text()}"
                    ) from None
                time.sleep(0.2)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(self._context()), self._loop).result(10)
        return self

    def _context(self) -> ssl.SSLContext | None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.certificates.server_cert, self.certificates.server_key)
        return context

    def _connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)

    async def _serve(self, context: ssl.SSLContext | None) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port, ssl=context)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        loop = asyncio.get_running_loop()
        try:
            sock = await loop.run_in_executor(self._upstream, self._connect)
            sock.setblocking(False)
            up_reader, up_writer = await asyncio.open_connection(sock=sock)
        except OSError:
            writer.close()
            return
        try:
            admitted = await self._admit(reader, writer, up_reader, up_writer)
        except asyncio.CancelledError:  # the proxy stops mid-conversation
            admitted = False
        if not admitted:
            writer.close()
            up_writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        except asyncio.CancelledError:  # the proxy stops
            writer.close()
            up_writer.close()

    async def _admit(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> bool:
        """Whether the client may go on to the broker (a subclass may first hold a conversation with it)."""
        return True

    def stop(self) -> None:
        if self._thread.is_alive():

            async def close() -> None:
                self._server.close()
                relays = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for t in relays:
                    t.cancel()
                await asyncio.gather(*relays, return_exceptions=True)

            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
        self._upstream.shutdown()
        if self._broker is not None:
            self._broker.terminate()
            try:
                self._broker.wait(10)
            except subprocess.TimeoutExpired:
                self._broker.kill()
                self._broker.wait()
        subprocess.run(["ip", "netns", "del", self.namespace], check=False)
