"""The data-quality report files as the job page serves them (`/reports/<job>/<path>`): a run's file read from
wherever its run put it (the index in the store says where: the job's object store, or a folder), so a report
a worker on one host wrote opens from the API server on another; the rolling summary rendered from the index,
so it lists exactly the kept runs. No Airflow here.

Reports hold example records and run scripts (Data Docs), yet they are served from Airflow's own origin: every
file goes out with `REPORT_HEADERS`, whose `sandbox` puts a page in an opaque origin, so its scripts can read
no cookie and call no Airflow API as the user. A sandboxed page's own requests for its stylesheets, scripts
and images carry no session cookie either (the browser counts them cross-site), so a page is served with the
report's local assets inlined (`self_contained`)."""

from __future__ import annotations

import base64
import mimetypes
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import JobConfig
from elasticity.quality.history import run_page
from elasticity.quality.report_files import ReportFiles

INDEX_METRICS = 200  # batches charted on the rolling page, as a data-quality run charts them
MAX_INLINED_IMAGE = 64 * 1024  # a bigger image is left to its link (which the sandbox then cannot load)

# No network at all: scripts and styles inline or from the report itself, images inline, no fetch, no form,
# no plugin, no <base>; framed only by Airflow's own pages (its UI embeds the job page).
REPORT_CSP = "; ".join(
    [
        "sandbox allow-scripts",
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'none'",
        "form-action 'none'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'self'",
    ]
)
REPORT_HEADERS = {"Content-Security-Policy": REPORT_CSP, "X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class ReportFile:
    body: bytes
    media_type: str


def report_file(config: JobConfig, store: CheckpointStore, path: str) -> ReportFile:
    """The file at `path` under the job's reports, a page with its local assets inlined; FileNotFoundError when
    there is none (or a removed run's)."""
    found = _read(config, store, path)
    if found.media_type != "text/html":
        return found
    cache: dict[str, ReportFile] = {}

    def asset(p: str) -> ReportFile:
        if p not in cache:
            cache[p] = _read(config, store, p)
        return cache[p]

    return ReportFile(self_contained(found.body.decode(), path, asset).encode(), found.media_type)


def _read(config: JobConfig, store: CheckpointStore, path: str) -> ReportFile:
    parts = PurePosixPath(path).parts
    if not parts or ".." in parts or path.startswith("/"):
        raise FileNotFoundError(path)
    media = mimetypes.guess_type(parts[-1])[0] or "application/octet-stream"
    job = config.job_name
    if parts == ("summary.html",):
        from elasticity.quality.report import INDEX_RUNS, index_html  # the [quality] extra's: its reports exist only with it

        page = run_page(store, job, limit=INDEX_RUNS)
        return ReportFile(index_html(job, page, store.metrics(job, limit=INDEX_METRICS)).encode(), media)
    reports = ReportFiles(config.report_location)
    if parts[0] == "runs" and len(parts) > 2:
        run = store.quality_run(job, parts[1])
        if run is None:
            raise FileNotFoundError(path)
        return ReportFile(reports.files_of(run.report).read_bytes("/".join(parts[2:])), media)
    return ReportFile(reports.read_bytes(path), media)


_TAG = re.compile(r"<(link|script|img)\b([^>]*)>(\s*</script>)?", re.IGNORECASE)
_ATTR = re.compile(r"""([a-zA-Z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def self_contained(html: str, path: str, read: Callable[[str], ReportFile]) -> str:
    """`html` (the page at `path`) with the stylesheets and scripts it links from its own report inline and its
    small images as data URLs; a link that leaves the report, or whose file is missing, stays as it is."""

    def local(ref: str) -> ReportFile | None:
        ref = ref.split("#")[0].split("?")[0]
        if not ref or ref.startswith(("/", "\\")) or _SCHEME.match(ref):
            return None
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), ref))
        if target.startswith(".."):
            return None
        try:
            return read(target)
        except (FileNotFoundError, OSError):
            return None

    def inline(m: re.Match[str]) -> str:
        tag, attrs, closed = m.group(1).lower(), m.group(2), m.group(3)
        values = {a.lower(): v if v is not None else w for a, v, w in _ATTR.findall(attrs)}
        rel = values.get("rel", "").lower()
        ref: str = values.get("src" if tag in ("script", "img") else "href") or ""
        found = local(ref) if ref else None
        if found is None:
            return m.group(0)
        if tag == "link" and "stylesheet" in rel:
            return "<style>" + re.sub("</(?=style)", r"<\\/", found.body.decode(), flags=re.I) + "</style>"
        if tag == "script" and closed:
            return "<script>" + re.sub("</(?=script)", r"<\\/", found.body.decode(), flags=re.I) + "</script>"
        if (tag == "img" or "icon" in rel) and len(found.body) <= MAX_INLINED_IMAGE:
            url = f"data:{found.media_type};base64,{base64.b64encode(found.body).decode()}"
            return m.group(0).replace(ref, url, 1)
        return m.group(0)

    return _TAG.sub(inline, html)
