"""MkDocs hook: the built site loads nothing from another host (fonts, scripts, stylesheets, images, frames).

A link a reader clicks (<a href>) may point anywhere; what the browser fetches by itself must be in site/.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError

# a tag attribute the browser fetches on its own, or a CSS url()/@import, aimed at another host
FETCHED = re.compile(
    r"""<(?:script|img|iframe|source|audio|video|embed)\b[^>]*\bsrc=["']?(?:https?:)?//"""
    r"""|<link\b[^>]*\bhref=["']?(?:https?:)?//"""
    r"""|url\(\s*["']?(?:https?:)?//"""
    r"""|@import\s+["'](?:https?:)?//""",
    re.IGNORECASE,
)


def on_post_build(config) -> None:
    site = Path(config["site_dir"])
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix in {".html", ".css"}:
            for m in FETCHED.finditer(path.read_text(errors="replace")):
                found.append(f"{path.relative_to(site)}: {m.group(0)[:120]}")
    if found:
        raise PluginError("the site would load from another host:\n" + "\n".join(found))
