"""A broker that requires a SASL login, for the tests: the embedded broker (which checks no password: it accepts any
PLAIN login and cannot do SCRAM) in a network namespace of its own, behind a front on the address it advertises
that holds each connection's SASL conversation as a Kafka broker does, then relays the connection to the broker.

The front answers SaslHandshake (v1) and SaslAuthenticate (v0-v2) itself, checking PLAIN (RFC 4616) and
SCRAM-SHA-256/512 (RFC 5802, RFC 7677) against its users; ApiVersions goes through to the broker (which
advertises both SASL requests); any other request before a login closes the connection, as Kafka does. A wrong
login is answered with Kafka's SASL_AUTHENTICATION_FAILED and the connection closed. Over `certificates` the front
also terminates TLS (SASL_SSL)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import ssl
import struct
from collections import Counter
from pathlib import Path

from tests.support.tls_proxy import Certificates, TlsBroker

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58
ITERATIONS = 4096  # Kafka's default for a SCRAM credential
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslFailed(Exception):
    pass


def _hmac(name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, name).digest()


class ScramServer:
    """The server side of one SCRAM exchange (RFC 5802): server-first, then the proof's check and server-final."""

    def __init__(self, mechanism: str, users: dict[str, str]) -> None:
        self.hash, self.users = _HASHES[mechanism], users
        self.mechanism = mechanism
        self.step, self.user = 0, ""

    def answer(self, token: bytes) -> bytes:
        self.step += 1
        return self._first(token.decode()) if self.step == 1 else self._final(token.decode())

    def _first(self, message: str) -> bytes:
        gs2_flag, authzid, bare = message.split(",", 2)
        if gs2_flag not in ("n", "y"):
            raise SaslFailed("channel binding is not supported")
        self.gs2 = f"{gs2_flag},{authzid},"
        attrs = dict(a.split("=", 1) for a in bare.split(","))
        self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
        if self.user not in self.users:
            raise SaslFailed(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}"
            )
        self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        salt = os.urandom(16)
        salted = hashlib.pbkdf2_hmac(self.hash, self.users[self.user].encode(), salt, ITERATIONS)
        self.stored_key = hashlib.new(self.hash, _hmac(self.hash, salted, b"Client Key")).digest()
        self.server_key = _hmac(self.hash, salted, b"Server Key")
        self.server_first = f"r={self.nonce},s={base64.b64encode(salt).decode()},i={ITERATIONS}"
        self.client_first_bare = bare
        return self.server_first.encode()

    def _final(self, message: str) -> bytes:
        without_proof, _, proof = message.rpartition(",p=")
        attrs = dict(a.split("=", 1) for a in without_proof.split(","))
        if attrs.get("r") != self.nonce or base64.b64decode(attrs.get("c", "")) != self.gs2.encode():
            raise SaslFailed(f"Authentication failed: invalid SCRAM final message with SASL mechanism {self.mechanism}")
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = _hmac(self.hash, self.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), self.stored_key):
            raise SaslFailed(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}"
            )
        return b"v=" + base64.b64encode(_hmac(self.hash, self.server_key, auth_message))

    @property
    def done(self) -> bool:
        return self.step == 2


class PlainServer:
    """PLAIN (RFC 4616): one message, `authzid NUL user NUL password`."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users, self.user, self.done = users, "", False

    def answer(self, token: bytes) -> bytes:
        _, user, password = token.decode().split("\0")
        if self.users.get(user) != password:
            raise SaslFailed("Authentication failed: Invalid username or password")
        self.user, self.done = user, True
        return b""


async def _frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def _header(frame: bytes) -> tuple[int, int, int, int]:
    """(api key, version, correlation id, where the body starts) of a request with header v1 or v2."""
    api, version, correlation, client_len = struct.unpack(">hhih", frame[:10])
    return api, version, correlation, 10 + max(client_len, 0)


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _put_uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def _authenticate_token(frame: bytes, version: int, body: int) -> bytes:
    if version >= 2:  # flexible: a tagged-fields byte after the header, compact bytes
        at = body + 1
        size, at = _uvarint(frame, at)
        return frame[at : at + size - 1]
    (size,) = struct.unpack(">i", frame[body : body + 4])
    return frame[body + 4 : body + 4 + size]


def _authenticate_response(correlation: int, version: int, error: int, message: str | None, token: bytes) -> bytes:
    if version >= 2:
        text = b"\0" if message is None else _put_uvarint(len(message.encode()) + 1) + message.encode()
        body = struct.pack(">h", error) + text + _put_uvarint(len(token) + 1) + token + struct.pack(">q", 0) + b"\0"
        return struct.pack(">i", correlation) + b"\0" + body
    text = struct.pack(">h", -1) if message is None else struct.pack(">h", len(message.encode())) + message.encode()
    body = struct.pack(">h", error) + text + struct.pack(">i", len(token)) + token
    if version >= 1:
        body += struct.pack(">q", 0)  # session lifetime: none
    return struct.pack(">i", correlation) + body


def _send(writer: asyncio.StreamWriter, payload: bytes) -> None:
    writer.write(struct.pack(">i", len(payload)) + payload)


class SaslBroker(TlsBroker):
    """The embedded broker reachable only after a SASL login (`mechanisms` of `users`) at `bootstrap` (127.0.0.1:P),
    in the clear (SASL_PLAINTEXT) or over TLS with `certificates` (SASL_SSL): `start()`, then `stop()`.
    `logins` counts the accepted logins per (mechanism, user), `refused` the refused ones per mechanism."""

    def __init__(
        self,
        folder: Path,
        users: dict[str, str],
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        certificates: Certificates | None = None,
    ) -> None:
        super().__init__(folder, certificates)  # type: ignore[arg-type]
        self.users, self.mechanisms = users, mechanisms
        self.logins: Counter[tuple[str, str]] = Counter()
        self.refused: Counter[str] = Counter()

    def _context(self) -> ssl.SSLContext | None:
        return super()._context() if self.certificates is not None else None

    async def _admit(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> bool:
        """The connection's SASL conversation; True once a login passed."""
        server: ScramServer | PlainServer | None = None
        try:
            while True:
                frame = await _frame(reader)
                api, version, correlation, body = _header(frame)
                if api == API_VERSIONS:
                    _send(up_writer, frame)
                    _send(writer, await _frame(up_reader))
                elif api == SASL_HANDSHAKE and version >= 1:
                    (size,) = struct.unpack(">h", frame[body : body + 2])
                    mechanism = frame[body + 2 : body + 2 + size].decode()
                    known = b"".join(struct.pack(">h", len(m)) + m.encode() for m in self.mechanisms)
                    error = 0 if mechanism in self.mechanisms else UNSUPPORTED_SASL_MECHANISM
                    _send(writer, struct.pack(">ihi", correlation, error, len(self.mechanisms)) + known)
                    if error:
                        return False
                    server = PlainServer(self.users) if mechanism == "PLAIN" else ScramServer(mechanism, self.users)
                elif api == SASL_AUTHENTICATE and server is not None:
                    try:
                        token = server.answer(_authenticate_token(frame, version, body))
                    except (SaslFailed, ValueError, KeyError) as e:
                        self.refused[mechanism] += 1
                        message = str(e) if isinstance(e, SaslFailed) else f"Authentication failed: malformed {mechanism} message"
                        _send(writer, _authenticate_response(correlation, version, SASL_AUTHENTICATION_FAILED, message, b""))
                        await writer.drain()
                        return False
                    _send(writer, _authenticate_response(correlation, version, 0, None, token))
                    if server.done:
                        self.logins[(mechanism, server.user)] += 1
                        await writer.drain()
                        return True
                else:  # anything else before a login, as Kafka does: the connection is closed
                    return False
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return False
