"""MkDocs hook: the benchmarks' latest output (docs/results/latest/<bench>.md, written by bench/results.py when a
benchmark succeeds) is put into the page with the marker at build time, one section per benchmark."""

from __future__ import annotations

import re
from pathlib import Path

MARKER = "<!-- bench-results -->"
WRITTEN_BY = re.compile(r"<!-- written by (bench/\S+\.py) -->")


def script(path: Path, text: str) -> str:
    """The benchmark that wrote `path`: its first line names it, else `bench/<stem>.py`."""
    found = WRITTEN_BY.match(text)
    return found.group(1) if found else f"bench/{path.stem}.py"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    latest = Path(config["docs_dir"]) / "results" / "latest"
    texts = {p: p.read_text() for p in sorted(latest.glob("*.md"))}
    sections = [f"## `{script(p, t)}`\n\n{t}" for p, t in texts.items()]
    return markdown.replace(MARKER, "\n".join(sections) or "No benchmark has written its output yet.")
