"""Great Expectations Data Docs that open with no network.

GX's pages load Bootstrap, jQuery, bootstrap-table and Font Awesome from public
CDNs; the installed package ships only its own CSS, fonts and images. Offline
the pages open unstyled and the index's validation list (filled by
bootstrap-table) stays empty. This rewrites the built site: remote stylesheets,
scripts and images are dropped or pointed at the package's local copies, and
each page loads `static/offline.css` (the Bootstrap rules the pages use) and
`static/offline.js` (a few lines standing in for the jQuery calls they make:
tables from their data, tabs, collapses), copied from this package's own
`static/` folder (package data).
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

REMOTE_LINK = re.compile(r"<link[^>]*href=\"https?://[^>]*>\s*")
REMOTE_SCRIPT = re.compile(r"<script[^>]*src=\"https?://[^>]*>\s*</script>\s*")
REMOTE_IMAGE = re.compile(r"https://great-expectations-web-assets\.s3[^\"')]*?(logo-long|full_logo_dark)\.png(\?[^\"')]*)?")


def offline_page(text: str, prefix: str) -> str:
    """One page: remote assets out, the local ones in (`prefix` leads from the page to the site root)."""
    text = REMOTE_LINK.sub("", text)
    text = REMOTE_SCRIPT.sub("", text)
    text = REMOTE_IMAGE.sub(f"{prefix}static/images/logo-long.png", text)
    local = f'<link rel="stylesheet" href="{prefix}static/offline.css"><script src="{prefix}static/offline.js"></script>'
    return text.replace("<head>", "<head>" + local, 1)


def make_offline(site: Path) -> None:
    """Rewrite every page of a built Data Docs site and add the two local assets."""
    static = site / "static"
    static.mkdir(parents=True, exist_ok=True)
    for asset in ("offline.css", "offline.js"):
        (static / asset).write_text((files("elasticity.quality") / "static" / asset).read_text())
    for page in site.rglob("*.html"):
        depth = len(page.relative_to(site).parts) - 1
        page.write_text(offline_page(page.read_text(), "../" * depth if depth else "./"))
