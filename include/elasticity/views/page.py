"""The job page as HTML, server-rendered in the look of Airflow 3's UI, with a
little inline JavaScript: local times ("5 min ago"), and the rescale form,
whose preview asks this plugin for the dry run and whose apply triggers
`elastic_rescale` through Airflow's own REST API with the user's session, so
Airflow decides whether this user may rescale."""

from __future__ import annotations

import html
import math
import time
import urllib.parse

from elasticity.config import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY
from elasticity.metrics.charts import CSS as CHART_CSS
from elasticity.metrics.charts import svg
from elasticity.metrics.rates import charts
from elasticity.views.jobview import JobView, PolicyView, StoreRow

PAGE_SIZE = 100  # virtual tasks per page of the task table
RESCALE_DAG = "elastic_rescale"

CSS = """body{margin:0;font-family:Inter,system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:14px;color:#1a202c;background:#f7fafc}
header{background:#fff;border-bottom:1px solid #e2e8f0;padding:14px 28px;display:flex;align-items:center;gap:14px}
header h1{font-size:20px;margin:0;font-weight:600}main{padding:20px 28px;max-width:1280px}
a{color:#0066cc;text-decoration:none}a:hover{text-decoration:underline}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(160px,1fr));gap:12px;margin-bottom:18px}
.card{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:12px 14px}.card .k{color:#718096;font-size:12px}.card .v{font-size:22px;font-weight:600}
section{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:16px 18px;margin-bottom:18px}
section h2{font-size:16px;margin:0 0 12px;font-weight:600}.muted{color:#718096}
table{border-collapse:collapse;width:100%}th{text-align:left;color:#4a5568;font-weight:600;background:#f7fafc}
td,th{border-bottom:1px solid #edf2f7;padding:6px 8px;font-size:13px;vertical-align:top}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;border-radius:999px;padding:1px 8px;font-size:12px;font-weight:600}
.success{background:#c6f6d5;color:#22543d}.failed{background:#fed7d7;color:#822727}.info{background:#bee3f8;color:#2a4365}.neutral{background:#edf2f7;color:#4a5568}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:8px}
form.rescale{display:flex;gap:10px;align-items:center;flex-wrap:wrap}input[type=number]{width:80px;padding:5px 8px;border:1px solid #cbd5e0;border-radius:6px}
button{padding:6px 14px;border-radius:6px;border:1px solid #cbd5e0;background:#fff;cursor:pointer;font-weight:600}
button.primary{background:#017cee;color:#fff;border-color:#017cee}button:disabled{opacity:.5;cursor:not-allowed}
#plan{margin-top:12px;max-height:420px;overflow:auto}#apply-result{margin-top:10px}.pager{margin:8px 0;display:flex;gap:10px}
details>summary{cursor:pointer;font-weight:600;margin:6px 0}dl{display:grid;grid-template-columns:200px 1fr;gap:4px 12px;margin:0}dt{color:#718096}dd{margin:0}"""

JS = """
function ago(ms){var s=Math.round((Date.now()-ms)/1000),f=s<0?'in ':'',a=Math.abs(s),t;
 t=a<60?a+' s':a<3600?Math.round(a/60)+' min':a<172800?Math.round(a/3600)+' h':Math.round(a/86400)+' days';return s<0?f+t:t+' ago';}
function localTimes(){document.querySelectorAll('time[data-ms]').forEach(function(e){var ms=+e.dataset.ms;
 e.textContent=new Date(ms).toLocaleString()+' ('+ago(ms)+')';e.title=new Date(ms).toISOString();});}
localTimes();setInterval(localTimes,30000);
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
var form=document.getElementById('rescale-form');
if(form){var input=document.getElementById('factor-input'),apply=document.getElementById('apply'),plan=document.getElementById('plan'),
 out=document.getElementById('apply-result'),canTrigger=form.dataset.canTrigger==='true';
 input.addEventListener('input',function(){apply.disabled=true;});
 document.getElementById('preview').addEventListener('click',function(){apply.disabled=true;plan.textContent='computing the plan...';
  fetch(form.dataset.planUrl+'?factor='+encodeURIComponent(input.value),{credentials:'same-origin'}).then(function(r){
   return r.json().then(function(d){if(!r.ok)throw new Error(d.detail||r.status);return d;});}).then(function(p){
   if(!p.moves.length){plan.innerHTML='<p>Factor '+p.new_factor+' is the current one: nothing to change.</p>';return;}
   var rows=p.moves.slice(0,500).map(function(m){return'<tr><td>'+esc(m.new_task)+'</td><td>'+esc(m.sspkb)+'</td><td class=num>'+m.offset+
    '</td><td>'+esc(m.from_tasks.join(' + ')||'(new partition)')+'</td><td>'+esc(m.skipping.join(', '))+'</td></tr>';}).join('');
   plan.innerHTML='<p><b>Dry run:</b> factor '+p.old_factor+' &rarr; '+p.new_factor+', '+p.tasks_before+' &rarr; '+p.tasks_after+
    ' virtual tasks'+(p.moves.length>500?' (first 500 of '+p.moves.length+' moves)':'')+'. '+esc(p.notes.join('; '))+'</p>'+
    '<table id=plan-table><tr><th>new virtual task</th><th>SSPKb</th><th class=num>starts at offset</th><th>takes keys of</th><th>already done below</th></tr>'+rows+'</table>';
   apply.disabled=!canTrigger;}).catch(function(e){plan.innerHTML='<p class=failed>Preview failed: '+esc(e.message)+'</p>';});});
 apply.addEventListener('click',function(){apply.disabled=true;out.textContent='triggering '+form.dataset.dag+'...';
  fetch(form.dataset.triggerUrl,{method:'POST',credentials:'same-origin',headers:{'Content-Type':'application/json'},
   body:JSON.stringify({logical_date:null,conf:{job:form.dataset.job,factor:+input.value,dry_run:false},note:'from the elastic job page'})})
  .then(function(r){return r.json().then(function(d){if(!r.ok)throw new Error('Airflow answered '+r.status+': '+(d.detail&&d.detail.message||JSON.stringify(d.detail)));return d;});})
  .then(function(run){var url=form.dataset.runUrl+encodeURIComponent(run.dag_run_id);
   out.innerHTML='Started <a id=run-link href="'+url+'">'+esc(run.dag_run_id)+'</a>: the rescale waits for a running batch, then a data-quality run follows.';})
  .catch(function(e){out.innerHTML='<span class="badge failed">refused</span> '+esc(e.message);apply.disabled=false;});});}
"""


def _t(ms: int | None) -> str:
    """A time the browser shows in local time with "5 min ago"; UTC without JavaScript."""
    if not ms:
        return "-"
    return f'<time data-ms="{ms}">{time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))}</time>'


def _e(s: object) -> str:
    return html.escape(str(s))


def _verdict(ok: bool) -> str:
    return '<span class="badge success">PASS</span>' if ok else '<span class="badge failed">FAIL</span>'


def _card(key: str, value: str, ident: str = "") -> str:
    return f'<div class="card"><div class="k">{key}</div><div class="v"{f" id={ident}" if ident else ""}>{value}</div></div>'


def _health(view: JobView) -> str:
    """The engine and the run in progress, first on the page when something is wrong."""
    e, r = view.engine, view.run
    parts = []
    if e is not None:
        badge = "<span class='badge success'>reachable</span>" if e.reachable else "<span class='badge failed'>unreachable</span>"
        why = f" {_e(e.error)}" if e.error else ""
        parts.append(f"<p id=engine>Spark Connect server {_e(e.address)} {badge} since {_t(e.since_ms)}.{why}</p>")
    if r is not None:
        badge = (
            f"<span class='badge failed'>stuck: past the expected {r.expected_s:.0f} s</span>"
            if r.stuck
            else "<span class='badge info'>running</span>"
        )
        error = f"<br>last failed attempt: <code>{_e(r.last_error)}</code>" if r.last_error else ""
        parts.append(f"<p id=run>Run {_e(r.run_id)} {badge}, attempt {r.attempt}, started {_t(r.started_ms)}.{error}</p>")
    return f"<section><h2>Engine and run</h2>{''.join(parts)}</section>" if parts else ""


def _policy(p: PolicyView | None) -> str:
    if p is None:
        return '<p class="muted">unknown</p>'
    rows = [
        (
            "policy",
            {
                "schedule": "time schedule (job.elasticity.schedule)",
                "autosize": "autosizer (job.elasticity.autosize)",
                "none": "none: manual rescales only",
            }[p.kind],
        )
    ]
    if p.rules:
        rows.append(
            ("rules", "<br>".join(f"<code>{_e(r.cron)}</code> &rarr; factor {r.factor}, next {_t(r.next_ms)}" for r in p.rules))
        )
    if p.bounds:
        b = p.bounds
        rows.append(
            (
                "autosizer bounds",
                f"factor {b['min']:.0f}..{b['max']:.0f}, cool-down {b['cooldown_ms'] / 60000:.0f} min, "
                f"drain the backlog within {b['target_lag_s']:.0f} s",
            )
        )
    if p.kind != "none":
        rows.append(("wants now", f"factor {p.wants} ({_e(p.reason)})" if p.wants is not None else _e(p.reason)))
    if p.hold_until_ms:
        rows.append(("manual hold", f"factor {p.hold_factor} until {_t(p.hold_until_ms)} ({_e(p.hold_reason)})"))
    rows.append(("next", f"<b>{_e(p.next_step)}</b>"))
    return "<dl id=policy>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _tasks(view: JobView, page: int) -> str:
    pages = max(1, math.ceil(len(view.tasks) / PAGE_SIZE))
    page = min(max(1, page), pages)
    first = (page - 1) * PAGE_SIZE
    containers: dict[str, list[int]] = {}  # container -> [tasks, lag, its first page]
    for i, t in enumerate(view.tasks):
        c = containers.setdefault(t.container, [0, 0, i // PAGE_SIZE + 1])
        c[0] += 1
        c[1] += view.lag_per_task.get(t.task, 0)
    summary = "".join(
        f"<tr><td>{_e(c)}</td><td class=num>{n:,}</td><td class=num>{lag:,}</td><td><a href='?page={p}#tasks'>page {p}</a></td></tr>"
        for c, (n, lag, p) in containers.items()
    )
    rows = []
    for t in view.tasks[first : first + PAGE_SIZE]:
        cps = "<br>".join(f"{_e(s.sspkb)}" for s in t.sspkbs)
        offsets = "<br>".join(
            f"{s.offset:,}"
            + (
                f" <span class=muted title='offset ranges other buckets already processed'>+{s.watermarks} wm</span>"
                if s.watermarks
                else ""
            )
            for s in t.sspkbs
        )
        lag = "?" if view.lag_error else f"{view.lag_per_task.get(t.task, 0):,}"
        rate = f"{t.rate:,.0f}" if t.rate is not None else "-"
        stores = "<br>".join(_store(s) for s in t.stores) or "-"
        rows.append(
            f"<tr><td>{_e(t.container)}</td><td class=task>{_e(t.task)}</td><td>{cps}</td><td class=num>{offsets}</td>"
            f"<td class='num lag'>{lag}</td><td class=num>{rate}</td><td class=stores>{stores}</td></tr>"
        )
    pager = (
        "".join(f"<a href='?page={i}#tasks'>{'<b>' + str(i) + '</b>' if i == page else i}</a>" for i in range(1, pages + 1))
        if pages > 1
        else ""
    )
    return (
        f"<table class=containers><tr><th>container</th><th class=num>virtual tasks</th><th class=num>lag (offsets)</th><th></th></tr>{summary}</table>"
        f"<p class=muted>Virtual tasks {first + 1}-{min(first + PAGE_SIZE, len(view.tasks))} of {len(view.tasks):,}, by container. "
        "Lag: offsets between the task's checkpoint and its partition's end, now (records of the partition's other buckets are "
        f"among them). Records/s: of the task's own processing time in its latest batch.</p><div class=pager>{pager}</div>"
        "<table id=tasks><tr><th>container</th><th>virtual task</th><th>SSPKb</th><th class=num>checkpoint (next offset)</th>"
        f"<th class=num>lag (offsets)</th><th class=num>records/s</th><th>stores (size, last marker)</th></tr>{''.join(rows)}</table>"
    )


def _store(s: StoreRow) -> str:
    size = (
        "size ?"
        if s.disk_bytes is None
        else f"{s.disk_bytes / 1e6:,.1f} MB"
        if s.disk_bytes >= 1e6
        else f"{s.disk_bytes / 1e3:,.0f} kB"
    )
    short = {BLOB_STORE_FACTORY: "blobstore", KAFKA_CHANGELOG_FACTORY: "kafka"}
    markers = "; ".join(f"{short.get(f, f)}: {m}" for f, m in sorted(s.markers.items())) or "no marker yet"
    return f"{_e(s.store)} <span class=muted title='{_e(markers)}'>{size}, {_e(markers[:60])}</span>"


def _check(c: dict) -> str:
    return f'<span title="{_e(c["describe"])}: {c["unexpected"]:,} of {c["rows"]:,} unexpected">{_verdict(c["success"])} {_e(c["name"])}</span>'


def _quality(view: JobView) -> str:
    if not view.quality_runs:
        return '<p class="muted">No data-quality run yet.</p>' + _runs_pager(view)
    base = f"../reports/{urllib.parse.quote(view.job)}"
    rows = []
    for r in view.quality_runs:
        run = f"{base}/runs/{urllib.parse.quote(r['folder'])}"
        verdict = '<span class="badge success">PASSED</span>' if r["success"] else '<span class="badge failed">FAILED</span>'
        rows.append(
            f"<tr><td>{_t(r['finished_ms'])}</td><td>{_e(r['run'])}</td><td>{_e(r['window'])}</td><td>{verdict}</td>"
            f"<td>{' '.join(_check(c) for c in r['checks'])}</td><td><a href='{run}/summary.html'>report</a> &middot; "
            f"<a class=docs href='{run}/data_docs/index.html'>Data Docs</a></td></tr>"
        )
    return (
        f"<p><a href='{base}/summary.html'>Latest runs</a></p>{_runs_pager(view)}<table id=quality><tr><th>finished</th><th>run</th><th>window</th>"
        f"<th>verdict</th><th>checks</th><th>reports</th></tr>{''.join(rows)}</table>"
    )


def _pager(newer: str | None, older: str | None, ident: str) -> str:
    """Links to the newest page and to the next older one of a history, when there are such pages."""
    links = [
        f"<a id={ident}-newest href='{newer}'>newest</a>" if newer else "",
        f"<a id={ident}-older href='{older}'>older</a>" if older else "",
    ]
    return f"<div class=pager>{''.join(links)}</div>" if any(links) else ""


def _query(**params: int | None) -> str:
    return "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})


def _batches_pager(view: JobView) -> str:
    return _pager(
        _query(runs_before=view.runs_before) + "#batches" if view.before is not None else None,
        _query(before=view.older_batches, runs_before=view.runs_before) + "#batches" if view.older_batches is not None else None,
        "batches",
    )


def _runs_pager(view: JobView) -> str:
    return _pager(
        _query(before=view.before) + "#quality" if view.runs_before is not None else None,
        _query(before=view.before, runs_before=view.older_runs) + "#quality" if view.older_runs is not None else None,
        "runs",
    )


def _batches(view: JobView, limit: int = 10) -> str:
    """The latest batches: what they did, where they ran, and the stores they had to restore (a slot that moved
    executor restores its stores from their backends)."""
    rows = []
    for b in reversed(view.batches[-limit:]):
        m = b.get("metrics", {})
        r = m.get("state-restores", {})
        rows.append(
            f"<tr><td class=num>{b['batch_id']}</td><td class=num>{b['factor']}</td><td class=num>{b['processed']:,}</td>"
            f"<td class=num>{b['durations_ms'].get('total', 0) / 1000:.2f}</td><td class=num>{r.get('count', 0)}</td>"
            f"<td class=num>{r.get('bytes', 0):,}</td><td>{_e(', '.join(m.get('executors', [])))}</td></tr>"
        )
    return (
        "<table id=batches><tr><th class=num>batch</th><th class=num>factor</th><th class=num>processed</th>"
        "<th class=num>seconds</th><th class=num>store restores</th><th class=num>bytes restored</th><th>executors</th></tr>"
        f"{''.join(rows)}</table>"
    )


def render(view: JobView, page: int = 1, can_trigger: bool = True) -> str:
    head = f"""<!doctype html><html><head><meta charset="utf-8"><title>Elastic job {_e(view.job)}</title>
<style>{CSS}{CHART_CSS}</style></head><body><header><h1>Elastic job {_e(view.job)}</h1>
<a href="../../dags?tags=elasticity">DAGs</a><a href="../api/jobs/{urllib.parse.quote(view.job)}">JSON</a></header><main>"""
    if view.generation is None:
        return head + "<section><p>No generation yet: the job has not run.</p></section></main></body></html>"
    last = view.batches[-1] if view.batches else None
    q = view.quality
    cards = "".join(
        [
            _card("generation", str(view.generation), "generation"),
            _card("elasticity factor", str(view.factor), "factor"),
            _card("virtual tasks / containers", f"{len(view.tasks):,} / {len(view.containers)}"),
            _card("records behind", "?" if view.lag_error else f"{view.records_behind:,}", "records-behind"),
            _card("lag now (offsets, per SSPKb)", "?" if view.lag_error else f"{view.total_lag:,}"),
            _card("last batch", f"#{last['batch_id']}<div class=k>{_t(last.get('finished_ms'))}</div>" if last else "-"),
            _card(
                "last data quality",
                ("PASSED" if q["success"] else "FAILED") + f"<div class=k>{_t(q['finished_ms'])}</div>" if q else "-",
            ),
        ]
    )
    lag_note = f"<p><span class='badge failed'>live lag unknown</span> {_e(view.lag_error)}</p>" if view.lag_error else ""
    job = urllib.parse.quote(view.job)
    form = f"""<form class=rescale id=rescale-form onsubmit="return false" data-job="{_e(view.job)}" data-dag="{RESCALE_DAG}"
data-plan-url="../api/jobs/{job}/plan" data-trigger-url="../../api/v2/dags/{RESCALE_DAG}/dagRuns" data-run-url="../../dags/{RESCALE_DAG}/runs/"
data-can-trigger="{"true" if can_trigger else "false"}"><label>New factor <input type=number id=factor-input min=1 max=256 value="{view.factor}"></label>
<button type=button id=preview>Preview the migration</button>
<button type=button class=primary id=apply disabled>Apply: trigger {RESCALE_DAG}</button>
{"" if can_trigger else '<span class="badge neutral">your role may not trigger DAGs: preview only</span>'}</form>
<div id=plan></div><div id=apply-result></div>"""
    rescales = "".join(
        f"<tr><td class=num>{r['generation']}</td><td class=num>{r['factor']}</td><td><span class='badge info'>{_e(r['origin'])}</span></td>"
        f"<td>{_e(r['reason'])}</td><td>{_t(r['created_ms'])}</td></tr>"
        for r in reversed(view.rescales)
    )
    return f"""{head}<div class=cards>{cards}</div>{_health(view)}
<section><h2>Effect of scaling</h2>{lag_note}<div class=charts>{"".join(svg(c) for c in charts(view.batches))}</div></section>
<section><h2>Recent batches</h2>{_batches_pager(view)}{_batches(view)}</section>
<section><h2>Rescale</h2>{form}</section>
<section><h2>Scale policy</h2>{_policy(view.policy)}</section>
<section><h2>Virtual tasks and checkpoints</h2>{_tasks(view, page)}</section>
<section><h2>Rescales</h2><table id=rescales><tr><th class=num>generation</th><th class=num>factor</th><th>origin</th><th>why</th><th>when</th></tr>{rescales}</table></section>
<section><h2>Data quality</h2>{_quality(view)}</section>
</main><script>{JS}</script></body></html>"""
