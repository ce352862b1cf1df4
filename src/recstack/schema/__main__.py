"""``python -m recstack.schema``: rewrite the committed ``profile.schema.json`` from the models."""

from __future__ import annotations

from pathlib import Path

from recstack.outputs import atomic_write_text
from recstack.schema import SCHEMA_FILE, json_schema_text

if __name__ == "__main__":
    out = atomic_write_text(Path(__file__).with_name(SCHEMA_FILE), json_schema_text())
    print(f"{out} written")
