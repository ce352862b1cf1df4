"""Assemble one self-contained HTML page from the package's assets and a data payload.

Contract: the page loads nothing from the network. Its CSS and script are
inlined from ``recstack/report/assets``; the data sits in a
``<script type="application/json">`` block written by :func:`safe_json`, which
escapes ``<``, ``>``, ``&`` and U+2028/U+2029 so no string from a model, config
or trace can close the block or open a tag. The scripts render every such
string with ``textContent``. A Content-Security-Policy allows only the page's
own script (by its SHA-256), inline styles and ``data:`` images, so even a
string that slipped through could neither run code nor fetch anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from recstack.errors import DataError
from recstack.outputs import atomic_write_text

_SLOT = re.compile(r"\{\{(TITLE|CSP|CSS|SCRIPT|DATA)\}\}")
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def asset(name: str) -> str:
    """The text of one file under ``recstack/report/assets``."""
    return resources.files("recstack.report").joinpath("assets", name).read_text(encoding="utf-8")


def safe_json(obj: Any) -> str:
    """JSON that is safe inside a ``<script>`` block: no ``<``, ``>``, ``&``, U+2028 or U+2029 left raw.

    The replacements are JSON string escapes, so ``json.loads(safe_json(x)) == x``.
    """
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return re.sub("[<>&\u2028\u2029]", lambda m: _ESCAPES[m.group(0)], text)


def render_page(*, title: str, scripts: list[str], data: Any) -> str:
    """A full HTML document: the shared page template with CSS, the named scripts and ``data`` inlined."""
    script = "\n".join(asset(s) for s in scripts)
    if "</script" in script.lower():
        raise AssertionError("an asset script contains '</script'; it would end the inline block")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; img-src data:; font-src data:; connect-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )
    slots = {
        "TITLE": html.escape(title, quote=True),
        "CSP": html.escape(csp, quote=False),  # our own text; it has no double quote
        "CSS": asset("style.css"),
        "SCRIPT": script,
        "DATA": safe_json(data),
    }
    # One pass: text put into a slot is never scanned for further slots.
    return _SLOT.sub(lambda m: slots[m.group(1)], asset("page.html"))


def write_page(text: str, path: str | Path) -> Path:
    """Write ``text`` to ``path`` atomically (parents created); a path that cannot be written is a DataError.

    A failed write (a full disk) leaves an existing page at ``path`` as it was.
    """
    p = Path(path)
    try:
        atomic_write_text(p, text)
    except OSError as exc:
        raise DataError(f"{p}: cannot write ({exc.strerror or exc})") from None
    return p
