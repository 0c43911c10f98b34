"""The REST client's retries against an HTTP server that answers as Airflow's API does on SQLite while the
scheduler holds the write lock ("500 Database error"): a trigger retried after a 500 creates one run."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from elasticity.local.airflow_api import AirflowApi, ApiError


class Api(BaseHTTPRequestHandler):
    """dagRuns of one DAG; the first `fail` POSTs answer 500, after creating the run when `commit_then_fail`."""

    runs: dict[str, dict]
    fail: int
    commit_then_fail: bool
    posts: int

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        cls.posts += 1
        run_id = body["dag_run_id"]
        if run_id in cls.runs:
            return self._send(409, {"detail": f"DAG Run with id {run_id} already exists"})
        if cls.posts <= cls.fail:
            if cls.commit_then_fail:
                cls.runs[run_id] = {"dag_run_id": run_id, "conf": body["conf"]}
            return self._send(500, {"detail": "Database error"})
        cls.runs[run_id] = {"dag_run_id": run_id, "conf": body["conf"]}
        return self._send(200, cls.runs[run_id])

    def do_GET(self) -> None:  # noqa: N802
        run_id = self.path.rsplit("/", 1)[1]
        if run_id in type(self).runs:
            return self._send(200, type(self).runs[run_id])
        return self._send(404, {"detail": "not found"})

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def api():
    def serve(fail: int, commit_then_fail: bool):
        handler = type("Handler", (Api,), {"runs": {}, "fail": fail, "commit_then_fail": commit_then_fail, "posts": 0})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return AirflowApi(f"http://127.0.0.1:{server.server_port}", "token"), handler

    servers: list[ThreadingHTTPServer] = []
    yield serve
    for s in servers:
        s.shutdown()


@pytest.mark.parametrize("commit_then_fail", [False, True])
def test_a_trigger_answered_500_is_retried_and_creates_one_run(api, commit_then_fail):
    client, server = api(fail=1, commit_then_fail=commit_then_fail)
    run_id = client.trigger("dag", {"factor": 4})
    assert server.posts == 2 and list(server.runs) == [run_id] and server.runs[run_id]["conf"] == {"factor": 4}


def test_a_trigger_that_keeps_failing_names_the_status(api):
    client, server = api(fail=99, commit_then_fail=False)
    with pytest.raises(ApiError, match=r"POST /dags/dag/dagRuns: 500 .*Database error") as e:
        client.trigger("dag")
    assert e.value.status == 500 and server.runs == {}
