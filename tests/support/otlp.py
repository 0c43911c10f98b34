"""An OTLP/HTTP metrics receiver on loopback: it answers `POST /v1/metrics` as an OpenTelemetry collector does,
decoding each `ExportMetricsServiceRequest` (protobuf, opentelemetry-proto's own classes) into points."""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)


@dataclass(frozen=True)
class Point:
    name: str
    kind: str  # gauge | sum | histogram | exponential_histogram
    attributes: dict[str, str]
    value: float  # a histogram's sum
    count: int = 0  # a histogram's count
    service: str = ""


def _attributes(kvs) -> dict[str, str]:
    return {kv.key: kv.value.string_value or str(kv.value.int_value or kv.value.double_value) for kv in kvs}


def decode(body: bytes) -> list[Point]:
    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    points = []
    for rm in request.resource_metrics:
        service = _attributes(rm.resource.attributes).get("service.name", "")
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                data = getattr(m, kind)
                for dp in data.data_points:
                    if kind in ("gauge", "sum"):
                        value = dp.as_double if dp.WhichOneof("value") == "as_double" else dp.as_int
                        points.append(Point(m.name, kind, _attributes(dp.attributes), value, service=service))
                    else:
                        points.append(Point(m.name, kind, _attributes(dp.attributes), dp.sum, dp.count, service))
    return points


class OtlpReceiver:
    def __init__(self) -> None:
        self.points: list[Point] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                received.paths.append(self.path)
                received.points += decode(body)
                answer = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def until(self, name: str, timeout_s: float = 30) -> list[Point]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if found := [p for p in self.points if p.name == name]:
                return found
            time.sleep(0.2)
        raise TimeoutError(f"no {name!r} received in {timeout_s} s; received {sorted({p.name for p in self.points})}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
