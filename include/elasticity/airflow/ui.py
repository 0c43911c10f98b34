"""The operators' view: a page per elastic job inside the Airflow UI, and the
JSON behind it. Both sit behind Airflow's own authentication (a bearer token
or the UI's session cookie); an anonymous call gets 401."""

from __future__ import annotations

import html
import json
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from ..checkpoint.tool import checkpoints_to_tool_json
from ..quality.report import _chart
from ..serde import ssp_to_key


@dataclass
class JobView:
    job: str
    generation: int | None
    factor: int | None
    containers: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # container -> task -> SSPKb keys
    lag_per_sspkb: dict[str, int] = field(default_factory=dict)  # offsets between each virtual task's checkpoint and its partition's end
    lag_per_task: dict[str, int] = field(default_factory=dict)
    lag_error: str | None = None  # why the live lag is unknown (broker down): never an older generation's figures instead
    scale_policy: str = ""
    lag_history: list[dict[str, Any]] = field(default_factory=list)  # batch_id, factor, lag per SSPKb
    checkpoints: dict[str, Any] = field(default_factory=dict)
    rescales: list[dict[str, Any]] = field(default_factory=list)
    quality: dict[str, Any] | None = None
    rescale_form: str = ""


def job_view(job: str) -> JobView:
    from .tasks import open_job

    config, store, coordinator = open_job(job)
    current = coordinator.current()
    view = JobView(job, current.number if current else None, current.factor if current else None)
    # the DAG's page, whose Trigger button opens the form (its `job` param lists this job)
    view.rescale_form = "../../dags/elastic_rescale?" + urllib.parse.urlencode({"job": job})
    if current is None:
        return view
    for c in current.job_model.containers:
        view.containers[c.processor_id] = {t.task_name.name: sorted(ssp_to_key(s) for s in t.system_stream_partitions) for t in c.tasks}
    metrics = store.metrics(job, limit=50)
    try:  # the current model's checkpoints against fresh high watermarks
        from ..kafka.consumer import KafkaInputs
        from ..lag import lag_report

        view.lag_per_sspkb = lag_report(config, store, KafkaInputs(config)).per_sspkb
    except (ConnectionError, OSError, RuntimeError) as e:
        view.lag_error = str(e)
    view.scale_policy = scale_policy(job)
    for c in current.job_model.containers:
        for t in c.tasks:
            view.lag_per_task[t.task_name.name] = sum(view.lag_per_sspkb.get(ssp_to_key(s), 0) for s in t.system_stream_partitions)
    view.lag_history = [{"batch_id": m["batch_id"], "factor": m["factor"], "lag": m["metrics"].get("lag", {}),
                         "records_read": m["records_read"], "durations_ms": m["durations_ms"]} for m in metrics]
    view.checkpoints = checkpoints_to_tool_json(coordinator.checkpoints(current).values())
    view.rescales = [{"generation": g.number, "factor": g.factor, "reason": g.reason, "created_ms": g.created_ms}
                     for g in store.generations(job)]
    summary = Path(config.path("job.report.path", "reports")) / "summary.json"
    if summary.is_file():
        view.quality = json.loads(summary.read_text())
    return view


def scale_policy(job: str) -> str:
    from .tasks import scale_decision

    d = scale_decision(job)
    if d.hold is not None:
        until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d.hold.until_ms / 1000))
        return f"manual hold at factor {d.hold.factor} until {until} ({d.reason})"
    if d.factor is None:
        return d.reason
    return f"{d.origin}: wants factor {d.factor} ({d.reason})"


def render(view: JobView) -> str:
    if view.generation is None:
        return f"<!doctype html><html><body><h1>{html.escape(view.job)}</h1><p>No generation yet: the job has not run.</p></body></html>"
    xs = [h["batch_id"] for h in view.lag_history]
    keys = sorted({k for h in view.lag_history for k in h["lag"]})
    marks, prev = [], None
    for h in view.lag_history:
        if prev is not None and h["factor"] != prev:
            marks.append((h["batch_id"], f"factor {prev}->{h['factor']}"))
        prev = h["factor"]
    chart = _chart("Lag per SSPKb over recent batches", xs, {k: [h["lag"].get(k, 0) for h in view.lag_history] for k in keys}, marks)
    rows = "".join(
        f"<tr><td>{cid}</td><td class=task>{html.escape(task)}</td><td>{html.escape(', '.join(ssps))}</td>"
        f"<td class=lag>{view.lag_per_task.get(task, 0)}</td></tr>"
        for cid, tasks in view.containers.items() for task, ssps in tasks.items()
    )
    rescales = "".join(f"<tr><td>{r['generation']}</td><td>{r['factor']}</td><td>{html.escape(r['reason'])}</td><td>{r['created_ms']}</td></tr>"
                       for r in view.rescales)
    q = view.quality
    quality = "<p>No data-quality run yet.</p>" if not q else (
        f"<p>Last data-quality run ({html.escape(q['window'])}): <b>{'PASSED' if q['success'] else 'FAILED'}</b> "
        f"&middot; <a href='reports/{urllib.parse.quote(view.job)}/summary.html'>summary</a> "
        f"&middot; <a href='reports/{urllib.parse.quote(view.job)}/data_docs/index.html'>Data Docs</a></p><ul>"
        + "".join(f"<li>{'PASS' if c['success'] else 'FAIL'} {html.escape(c['name'])}: {c['unexpected']} of {c['rows']}</li>" for c in q["checks"])
        + "</ul>")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Elastic job {html.escape(view.job)}</title>
<style>body{{font-family:sans-serif;margin:20px}} td,th{{border:1px solid #ccc;padding:3px 8px;font-size:13px}} table{{border-collapse:collapse}}</style></head>
<body><h1>Elastic job {html.escape(view.job)}</h1>
<p>Generation <b id=generation>{view.generation}</b>, elasticity factor <b id=factor>{view.factor}</b>,
{sum(len(t) for t in view.containers.values())} virtual tasks on {len(view.containers)} containers.
<a id=rescale href="{html.escape(view.rescale_form)}">Rescale this job</a> (elastic_rescale: Trigger, choose job {html.escape(view.job)} and the factor)
&middot; <a href="api/jobs/{urllib.parse.quote(view.job)}">JSON</a></p>
{chart}
<p id=policy>Scale policy: {html.escape(view.scale_policy)}</p>
<h2>Job model and lag</h2><p>Lag of a virtual task: offsets between its checkpoint and its partition's end, now
(records of the partition's other buckets are among them).{' <b>Live lag unknown: ' + html.escape(view.lag_error) + '</b>' if view.lag_error else ''}</p>
<table id=tasks><tr><th>container</th><th>virtual task</th><th>SSPKb</th><th>lag (offsets)</th></tr>{rows}</table>
<h2>Rescales</h2><table><tr><th>generation</th><th>factor</th><th>why</th><th>at (ms)</th></tr>{rescales}</table>
<h2>Data quality</h2>{quality}
<h2>Latest checkpoints</h2><pre>{html.escape(json.dumps(view.checkpoints, indent=1)[:20000])}</pre>
</body></html>"""


def _authenticated():
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return Depends(requires_authenticated())


def make_app() -> FastAPI:
    """Mounted by the plugin at /elasticity: `/jobs/<job>` (page), `/api/jobs` and `/api/jobs/<job>` (JSON),
    `/reports/<job>/...` (the data-quality report files)."""
    from .hooks import job_configs

    app = FastAPI(title="Elastic jobs", description=__doc__)
    router = APIRouter(dependencies=[_authenticated()])

    def known(job: str) -> str:
        if job not in job_configs():
            raise HTTPException(404, f"no elastic job {job!r}")
        return job

    @router.get("/api/jobs")
    def jobs() -> list[str]:
        return sorted(job_configs())

    @router.get("/api/jobs/{job}")
    def job_json(job: str) -> dict[str, Any]:
        return asdict(job_view(known(job)))

    @router.get("/jobs/{job}", response_class=HTMLResponse)
    def job_page(job: str) -> str:
        return render(job_view(known(job)))

    @router.get("/reports/{job}/{path:path}")
    def report_file(job: str, path: str) -> FileResponse:
        from .tasks import open_job

        config = open_job(known(job))[0]
        root = Path(config.path("job.report.path", "reports")).resolve()
        target = (root / path).resolve()
        if root not in target.parents or not target.is_file():
            raise HTTPException(404, "no such report file")
        return FileResponse(target)

    app.include_router(router)
    return app
