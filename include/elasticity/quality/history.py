"""The data-quality runs of a job: each run's `runs/<run>/summary.json` in the report folder,
read by the rolling summary page and the job page."""

from __future__ import annotations

import json
from pathlib import Path


def run_summaries(root: Path) -> list[dict]:
    """Every run's summary with its folder name, oldest first."""
    return sorted(
        ({**json.loads(p.read_text()), "folder": p.parent.name} for p in root.glob("runs/*/summary.json")),
        key=lambda r: r["finished_ms"],
    )
