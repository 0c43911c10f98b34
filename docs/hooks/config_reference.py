"""MkDocs hook: the Configuration page's table is rendered from the keys' declarations at build time."""

from __future__ import annotations

MARKER = "<!-- config-reference -->"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    from elasticity.config.reference import render

    return markdown.replace(MARKER, render())
