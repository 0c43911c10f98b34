"""Runs the data-quality suites for a job over a window of committed batches and
writes the report folder: Great Expectations Data Docs plus `summary.html`."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from ..checkpoint.store import CheckpointStore
from ..config import JobConfig
from ..coordinator import Inputs, JobCoordinator
from ..kafka.admin import resolve_bootstrap
from ..model import SystemStreamPartition
from ..sinks import AUDIT_SCHEMA, OUTPUT_SCHEMA, read_table
from ..spark.reader import Chunk, close_consumers, read_chunk
from .checks import QualityInputs
from .report import summary_html
from .suite import QualityResult, run_suites


class QualityFailed(AssertionError):
    pass


def load_inputs(config: JobConfig, store: CheckpointStore, inputs: Inputs, from_batch: int | None, to_batch: int | None) -> tuple[QualityInputs, str]:
    job = config.job_name
    committed = store.plans(job, "committed")
    window = [p for p in committed if (from_batch is None or p.batch_id >= from_batch) and (to_batch is None or p.batch_id <= to_batch)]
    ids = {p.batch_id for p in committed}
    audit = read_table(config.path("job.audit.path", "audit"), AUDIT_SCHEMA).to_pandas()
    audit = audit[audit["batch_id"].isin(ids)]

    coordinator = JobCoordinator(config, store, inputs)
    generation = coordinator.current()
    cps = coordinator.checkpoints(generation) if generation else {}
    starts: dict[SystemStreamPartition, int] = {}
    ends: dict[SystemStreamPartition, int] = {}
    for p in window:
        for r in p.ranges:
            starts[r.ssp] = min(r.start, starts.get(r.ssp, r.start))
            ends[r.ssp] = max(r.end, ends.get(r.ssp, r.end))
    for cp in cps.values():  # up to what the checkpoints claim, so nothing claimed escapes the check
        for ssp, offset in cp.offsets.items():
            base = ssp.without_key_bucket()
            if base in starts:
                ends[base] = max(offset, ends[base])
    rows = []
    try:
        for ssp, start in starts.items():
            bootstrap = resolve_bootstrap(config, ssp.system)
            for batch in read_chunk(Chunk(bootstrap, ssp.system, ssp.stream, ssp.partition, start, ends[ssp])):
                rows.append(batch.to_pandas()[["system", "stream", "partition", "offset", "key"]])
    finally:
        close_consumers()
    records = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["system", "stream", "partition", "offset", "key"])

    out_root = Path(config.path("job.output.path", "output"))
    sinks = []
    if out_root.is_dir():
        for d in sorted(out_root.iterdir()):
            t = read_table(str(d), OUTPUT_SCHEMA).to_pandas().assign(output=d.name)
            sinks.append(t[t["batch_id"].isin(ids)])
    sink = pd.concat(sinks, ignore_index=True) if sinks else pd.DataFrame()

    span = f"batches {window[0].batch_id}..{window[-1].batch_id}" if window else "no committed batch in the window"
    q = QualityInputs(audit, records, sink, {p.batch_id: p.generation for p in committed},
                      generation.factor if generation else 1, cps)
    return q, span


def run_quality(
    config: JobConfig, store: CheckpointStore, inputs: Inputs, from_batch: int | None = None, to_batch: int | None = None,
    report_dir: str | os.PathLike[str] | None = None,
) -> tuple[QualityResult, Path]:
    q, span = load_inputs(config, store, inputs, from_batch, to_batch)
    folder = Path(report_dir or config.path("job.report.path", "reports"))
    result = run_suites(q, folder)
    metrics = store.metrics(config.job_name, limit=200)
    (folder / "summary.html").write_text(summary_html(config.job_name, result, metrics, f"Window: {span}"))
    (folder / "summary.json").write_text(json.dumps({"job": config.job_name, "window": span, "success": result.success,
                                                     "checks": [asdict(c) for c in result.checks]}, indent=2))
    return result, folder / "summary.html"
