"""``python -m recstack.schema``: rewrite the committed ``profile.schema.json`` and every result document's
``NAME.schema.json`` from the models."""

from __future__ import annotations

from pathlib import Path

from recstack.outputs import atomic_write_text
from recstack.schema import SCHEMA_FILE, documents, json_schema_text

if __name__ == "__main__":
    here = Path(__file__).parent
    print(f"{atomic_write_text(here / SCHEMA_FILE, json_schema_text())} written")
    for name in documents.DOCUMENTS:
        print(f"{atomic_write_text(here / documents.schema_file(name), documents.json_schema_text(name))} written")
