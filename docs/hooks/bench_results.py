"""MkDocs hook: the benchmarks' latest output (docs/results/latest/<bench>.md, written by bench/results.py when a
benchmark succeeds) is put into the page with the marker at build time, one section per benchmark."""

from __future__ import annotations

from pathlib import Path

MARKER = "<!-- bench-results -->"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    latest = Path(config["docs_dir"]) / "results" / "latest"
    sections = [f"## `bench/{p.stem}.py`\n\n{p.read_text()}" for p in sorted(latest.glob("*.md"))]
    return markdown.replace(MARKER, "\n".join(sections) or "No benchmark has written its output yet.")
