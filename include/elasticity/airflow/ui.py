"""The operators' view: a page per elastic job inside the Airflow UI, the JSON
behind it, the dry run of a rescale, and the data-quality report files. All sit
behind Airflow's own authentication (a bearer token or the UI's session
cookie); an anonymous call gets 401. Applying a rescale is not done here: the
page triggers `elastic_rescale` through Airflow's REST API as the user."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse

from elasticity.config import MAX_ELASTICITY_FACTOR, ConfigError
from elasticity.jobmodel.grouping import GroupingError
from elasticity.views.jobview import JobView, build_view, preview_rescale
from elasticity.views.page import RESCALE_DAG, render


def job_view(job: str) -> JobView:
    from elasticity.airflow.health import engine_health, run_in_progress
    from elasticity.airflow.operators import spark_target
    from elasticity.airflow.tasks import open_job, policy_view

    config, store, coordinator = open_job(job)
    view = build_view(config, store, coordinator.inputs, policy_view(job) if coordinator.current() else None)
    target = spark_target("spark_default", config, f"{job}.properties")
    view.engine = engine_health(target.value) if target.kind == "connect" else None
    view.run = run_in_progress(job, config)
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
    """Mounted by the plugin at /elasticity: `/jobs/<job>` (page), `/api/jobs`, `/api/jobs/<job>` and
    `/api/jobs/<job>/plan?factor=G` (JSON), `/reports/<job>/...` (the data-quality report files)."""
    from elasticity.airflow.hooks import job_configs

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

    @router.get("/api/jobs/{job}/plan")
    def plan(job: str, factor: int = Query(ge=1, le=MAX_ELASTICITY_FACTOR)) -> dict[str, Any]:
        """The dry run of a rescale to `factor`: what the rescale DAG would do now."""
        from elasticity.airflow.tasks import open_job

        config, store, coordinator = open_job(known(job))
        if coordinator.current() is None:
            raise HTTPException(409, f"job {job!r} has not run yet: its first batch creates generation 1")
        try:
            return asdict(preview_rescale(config, store, coordinator.inputs, factor))
        except (ConfigError, GroupingError) as e:
            raise HTTPException(422, str(e)) from e

    @router.get("/jobs/{job}", response_class=HTMLResponse)
    def job_page(job: str, request: Request, page: int = 1) -> str:
        return render(job_view(known(job)), page, _may_trigger_rescale(request))

    @router.get("/reports/{job}/{path:path}")
    def report_file(job: str, path: str) -> FileResponse:
        from elasticity.airflow.tasks import open_job

        config = open_job(known(job))[0]
        root = Path(config.path("job.report.path", "reports")).resolve()
        target = (root / path).resolve()
        if root not in target.parents or not target.is_file():
            raise HTTPException(404, "no such report file")
        return FileResponse(target)

    app.include_router(router)
    return app
