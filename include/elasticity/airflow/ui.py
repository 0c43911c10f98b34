"""The operators' view: a page per elastic job inside the Airflow UI, the JSON
behind it, the dry run of a rescale, and the data-quality report files. All sit
behind Airflow's own authentication (a bearer token or the UI's session
cookie); an anonymous call gets 401. Airflow's auth manager decides the rest, per
DAG: everything of a job needs read on each of the job's DAGs (403 otherwise),
and the state's dry run, which scans every store snapshot, needs what a rescale
needs. Applying a rescale is not done here: the page triggers `elastic_rescale`
through Airflow's REST API as the user."""

from __future__ import annotations

import atexit
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from elasticity.checkpoint.store.pool import StorePool
from elasticity.config import MAX_ELASTICITY_FACTOR, ConfigError
from elasticity.jobmodel.grouping import GroupingError
from elasticity.quality.history import run_page
from elasticity.views.jobview import BATCHES, MAX_BATCHES, QUALITY_RUNS, JobView, build_view, metrics_page, preview_rescale
from elasticity.views.page import RESCALE_DAG, render


def job_view(
    job: str, stores: StorePool, *, limit: int = BATCHES, before: int | None = None, runs_before: int | None = None
) -> JobView:
    from elasticity.airflow.health import engine_health, run_in_progress
    from elasticity.airflow.operators import spark_target
    from elasticity.airflow.tasks import open_job, policy_view

    config, store, coordinator = open_job(job, stores)
    current = coordinator.current()
    policy = policy_view(config, store, current) if current else None
    view = build_view(config, store, coordinator.inputs, policy, limit=limit, before=before, runs_before=runs_before)
    target = spark_target(config.spark_conn_id, config, f"{job}.properties")
    view.engine = engine_health(store, target.value) if target.kind == "connect" else None
    view.run = run_in_progress(job, config, store)
    return view


JOB_DAGS = ("elastic_microbatch__{}", "elastic_data_quality__{}", "elastic_maintenance__{}")  # every job has these


def job_dags(job: str) -> list[str]:
    """The DAGs of one job: its page shows their runs, failures and reports."""
    return [d.format(job) for d in JOB_DAGS]


def _unreadable_dags(user: Any, jobs: Iterable[str]) -> dict[str, list[str]]:
    """Per job, those of its DAGs Airflow's auth manager does not let `user` read (each DAG with its team, as
    Airflow's own DAG endpoints ask)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
    from airflow.models.dag import DagModel

    dags = {job: job_dags(job) for job in jobs}
    teams = DagModel.get_dag_id_to_team_name_mapping([d for ds in dags.values() for d in ds])
    manager = get_auth_manager()
    return {
        job: [
            d
            for d in ds
            if not manager.is_authorized_dag(method="GET", details=DagDetails(id=d, team_name=teams.get(d)), user=user)
        ]
        for job, ds in dags.items()
    }


def _may_trigger_rescale(request: Request) -> bool:
    """Whether Airflow lets this user start `elastic_rescale` runs (the page disables Apply otherwise;
    Airflow's REST API enforces it either way)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    user = request.state.elasticity_user
    return get_auth_manager().is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=RESCALE_DAG), user=user
    )


def _authorized():
    """Every route's one check: a user (401 without a valid token or session), and for a route of a job
    (`{job}` in its path) read on each of the job's DAGs (403 naming those refused), then the job (404)."""
    from airflow.api_fastapi.core_api.security import get_user

    from elasticity.airflow.hooks import job_configs

    def check(request: Request, user=Depends(get_user)) -> None:  # noqa: B008 (401 without a valid token or session)
        request.state.elasticity_user = user
        job = request.path_params.get("job")
        if job is None:
            return
        refused = _unreadable_dags(user, [job])[job]
        if refused:
            raise HTTPException(
                403,
                f"elastic job {job!r}: Airflow does not let user {user.get_name()!r} read DAG {', '.join(refused)}; "
                "the job's page, data and reports need read on each of its DAGs",
            )
        if job not in job_configs():
            raise HTTPException(404, f"no elastic job {job!r}")

    return Depends(check)


def make_app() -> FastAPI:
    """Mounted by the plugin at /elasticity: `/jobs/<job>` (page), `/metrics` (Prometheus), `/api/jobs`, `/api/jobs/<job>`,
    `/api/jobs/<job>/metrics`, `/api/jobs/<job>/quality` and `/api/jobs/<job>/plan?factor=G` (JSON),
    `/reports/<job>/...` (the data-quality report files). Histories come a page at a time: `limit` entries below
    `before` (a batch id, or a data-quality run's `seq`; none: the latest), and `older` asks for the next page."""
    from elasticity.airflow.hooks import job_configs
    from elasticity.airflow.metrics_endpoint import JobsScrape
    from elasticity.airflow.tasks import open_job

    stores = StorePool()  # the process's stores, one engine per store URL, closed with the process
    scrape = JobsScrape(stores)  # /metrics: its Kafka clients held across scrapes
    atexit.register(stores.close)
    atexit.register(scrape.close)
    app = FastAPI(title="Elastic jobs", description=__doc__)
    router = APIRouter(dependencies=[_authorized()])

    @router.get("/api/jobs")
    def jobs(request: Request) -> list[str]:
        """The jobs whose DAGs this user may read."""
        refused = _unreadable_dags(request.state.elasticity_user, job_configs())
        return sorted(job for job, dags in refused.items() if not dags)

    @router.get("/metrics")
    def prometheus_metrics(request: Request, job: list[str] | None = Query(None)) -> Response:  # noqa: B008
        """The metrics of every job this user may read (each of its DAGs), in Prometheus' exposition format
        (OpenMetrics when the scraper asks for it); `job` (repeatable): only those jobs."""
        refused = _unreadable_dags(request.state.elasticity_user, job_configs())
        readable = {j for j, dags in refused.items() if not dags}
        if job is not None:
            if unknown := sorted(set(job) - set(refused)):
                raise HTTPException(404, f"no elastic job {unknown[0]!r}")
            if denied := sorted(set(job) - readable):
                raise HTTPException(403, f"elastic job {denied[0]!r}: its metrics need read on each of its DAGs")
            readable &= set(job)
        body, content_type = scrape.render(readable, request.headers.get("accept"))
        return Response(body, media_type=content_type)

    limit_q = Query(BATCHES, ge=1, le=MAX_BATCHES)
    before_q = Query(None, ge=1)

    @router.get("/api/jobs/{job}")
    def job_json(
        job: str, limit: int = limit_q, before: int | None = before_q, runs_before: int | None = before_q
    ) -> dict[str, Any]:
        return asdict(job_view(job, stores, limit=limit, before=before, runs_before=runs_before))

    @router.get("/api/jobs/{job}/metrics")
    def metrics(job: str, limit: int = limit_q, before: int | None = before_q) -> dict[str, Any]:
        """A page of the batches' metrics, oldest first, `older`: the `before` of the page before it, and
        `freshness`: p50/p99 over the last hour."""

        return metrics_page(open_job(job, stores)[1], job, limit=limit, before=before)

    @router.get("/api/jobs/{job}/quality")
    def quality(
        job: str, limit: int = Query(QUALITY_RUNS, ge=1, le=MAX_BATCHES), before: int | None = before_q
    ) -> dict[str, Any]:
        """A page of the kept data-quality runs, newest first, and `older`: the `before` of the next page."""

        page = run_page(open_job(job, stores)[1], job, limit=limit, before=before)
        return {"runs": list(page.runs), "older": page.older}

    @router.get("/api/jobs/{job}/plan")
    def plan(
        job: str, request: Request, factor: int = Query(ge=1, le=MAX_ELASTICITY_FACTOR), *, state: bool = False
    ) -> dict[str, Any]:
        """The dry run of a rescale to `factor`: what the rescale DAG would do now, from the checkpoints. `state`:
        also the state's move counted, which downloads and scans every store snapshot in this API server, so only
        for a user who may rescale."""

        if state and not _may_trigger_rescale(request):
            user = request.state.elasticity_user.get_name()
            raise HTTPException(
                403,
                f"the state's dry run scans every store snapshot of job {job!r}: it needs what a rescale needs, "
                f"triggering DAG {RESCALE_DAG}, which Airflow does not let user {user!r} do; without state=true the plan "
                "answers from the checkpoints",
            )
        config, store, coordinator = open_job(job, stores)
        if coordinator.current() is None:
            raise HTTPException(409, f"job {job!r} has not run yet: its first batch creates generation 1")
        try:
            return asdict(preview_rescale(config, store, coordinator.inputs, factor, state=state))
        except (ConfigError, GroupingError) as e:
            raise HTTPException(422, str(e)) from e

    @router.get("/jobs/{job}", response_class=HTMLResponse)
    def job_page(
        job: str,
        request: Request,
        page: int = 1,
        *,
        limit: int = limit_q,
        before: int | None = before_q,
        runs_before: int | None = before_q,
    ) -> str:
        view = job_view(job, stores, limit=limit, before=before, runs_before=runs_before)
        return render(view, page, can_trigger=_may_trigger_rescale(request))

    @router.get("/reports/{job}/{path:path}")
    def report(job: str, path: str) -> Response:
        """A report's file, read from wherever its run put it (the job's object store or report folder), so a
        report a worker on another host wrote opens here; the rolling summary is rendered from the index. Sandboxed
        (`REPORT_HEADERS`): a report's scripts run in an opaque origin, without the user's cookie or Airflow's API."""
        from elasticity.views.report_serving import REPORT_HEADERS, report_file

        config, store, _ = open_job(job, stores)
        try:
            found = report_file(config, store, path)
        except FileNotFoundError:
            raise HTTPException(404, "no such report file", headers=REPORT_HEADERS) from None
        return Response(found.body, media_type=found.media_type, headers=REPORT_HEADERS)

    app.include_router(router)
    return app
