"""The operators' view: a page per elastic job inside the Airflow UI, the JSON
behind it, the dry run of a rescale, and the data-quality report files. All sit
behind Airflow's own authentication (a bearer token or the UI's session
cookie); an anonymous call gets 401. Applying a rescale is not done here: the
page triggers `elastic_rescale` through Airflow's REST API as the user."""

from __future__ import annotations

import atexit
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


def _may_trigger_rescale(request: Request) -> bool:
    """Whether Airflow lets this user start `elastic_rescale` runs (the page disables Apply otherwise;
    Airflow's REST API enforces it either way)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    user = request.state.elasticity_user
    return get_auth_manager().is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=RESCALE_DAG), user=user
    )


def _authenticated():
    from airflow.api_fastapi.core_api.security import get_user

    def remember(request: Request, user=Depends(get_user)) -> None:  # noqa: B008 (401 without a valid token or session)
        request.state.elasticity_user = user

    return Depends(remember)


def make_app() -> FastAPI:
    """Mounted by the plugin at /elasticity: `/jobs/<job>` (page), `/api/jobs`, `/api/jobs/<job>`,
    `/api/jobs/<job>/metrics`, `/api/jobs/<job>/quality` and `/api/jobs/<job>/plan?factor=G` (JSON),
    `/reports/<job>/...` (the data-quality report files). Histories come a page at a time: `limit` entries below
    `before` (a batch id, or a data-quality run's `seq`; none: the latest), and `older` asks for the next page."""
    from elasticity.airflow.hooks import job_configs
    from elasticity.airflow.tasks import open_job

    stores = StorePool()  # the process's stores, one engine per store URL, closed with the process
    atexit.register(stores.close)
    app = FastAPI(title="Elastic jobs", description=__doc__)
    router = APIRouter(dependencies=[_authenticated()])

    def known(job: str) -> str:
        if job not in job_configs():
            raise HTTPException(404, f"no elastic job {job!r}")
        return job

    @router.get("/api/jobs")
    def jobs() -> list[str]:
        return sorted(job_configs())

    limit_q = Query(BATCHES, ge=1, le=MAX_BATCHES)
    before_q = Query(None, ge=1)

    @router.get("/api/jobs/{job}")
    def job_json(
        job: str, limit: int = limit_q, before: int | None = before_q, runs_before: int | None = before_q
    ) -> dict[str, Any]:
        return asdict(job_view(known(job), stores, limit=limit, before=before, runs_before=runs_before))

    @router.get("/api/jobs/{job}/metrics")
    def metrics(job: str, limit: int = limit_q, before: int | None = before_q) -> dict[str, Any]:
        """A page of the batches' metrics, oldest first, `older`: the `before` of the page before it, and
        `freshness`: p50/p99 over the last hour."""

        return metrics_page(open_job(known(job), stores)[1], job, limit=limit, before=before)

    @router.get("/api/jobs/{job}/quality")
    def quality(
        job: str, limit: int = Query(QUALITY_RUNS, ge=1, le=MAX_BATCHES), before: int | None = before_q
    ) -> dict[str, Any]:
        """A page of the kept data-quality runs, newest first, and `older`: the `before` of the next page."""

        page = run_page(open_job(known(job), stores)[1], job, limit=limit, before=before)
        return {"runs": list(page.runs), "older": page.older}

    @router.get("/api/jobs/{job}/plan")
    def plan(job: str, factor: int = Query(ge=1, le=MAX_ELASTICITY_FACTOR)) -> dict[str, Any]:
        """The dry run of a rescale to `factor`: what the rescale DAG would do now."""

        config, store, coordinator = open_job(known(job), stores)
        if coordinator.current() is None:
            raise HTTPException(409, f"job {job!r} has not run yet: its first batch creates generation 1")
        try:
            return asdict(preview_rescale(config, store, coordinator.inputs, factor))
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
        view = job_view(known(job), stores, limit=limit, before=before, runs_before=runs_before)
        return render(view, page, can_trigger=_may_trigger_rescale(request))

    @router.get("/reports/{job}/{path:path}")
    def report(job: str, path: str) -> Response:
        """A report's file, read from wherever its run put it (the job's object store or report folder), so a
        report a worker on another host wrote opens here; the rolling summary is rendered from the index."""
        from elasticity.views.report_serving import report_file

        config, store, _ = open_job(known(job), stores)
        try:
            found = report_file(config, store, path)
        except FileNotFoundError:
            raise HTTPException(404, "no such report file") from None
        return Response(found.body, media_type=found.media_type)

    app.include_router(router)
    return app
