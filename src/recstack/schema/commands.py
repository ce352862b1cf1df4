"""``recstack validate FILE [--json]``: check a profile against the contract.

Valid: exit 0 and one line (version, model, nodes, stages; an upgraded older
version says so). Invalid: the first bad field as a path (``root.children[2].time_s:
...``) and exit 2, through the CLI's one-line error (``--json`` prints the same as
JSON on stdout and still exits 2).
"""

from __future__ import annotations

import argparse
import json
import sys

from recstack.cli_base import add_command
from recstack.errors import EXIT_BAD_INPUT, DataError


def cmd_validate(args: argparse.Namespace) -> int:
    from recstack.schema.validate import summary  # lazy: pydantic and the schema (CLI start-up)

    try:
        info = summary(args.file)
    except DataError as exc:
        if not args.json:
            raise
        sys.stdout.write(json.dumps({"file": args.file, "valid": False, "error": str(exc)}, indent=2) + "\n")
        return EXIT_BAD_INPUT
    if args.json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
        return 0
    for note in info["notes"]:
        print(f"note: {note}", file=sys.stderr)
    upgraded = f" (upgraded from version {info['file_schema_version']})" if info["notes"] else ""
    print(
        f"{args.file}: valid recstack profile, schema version {info['schema_version']}{upgraded}; "
        f"model {info['model']}, {info['nodes']} nodes, {len(info['stages'])} stages, depth {info['depth']}"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``validate`` to the main CLI's sub-parsers."""
    p = add_command(sub, "validate", cmd_validate, help="check a profile JSON against the schema; names the first bad field")
    p.add_argument("file", help="profile JSON")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


__all__ = ["cmd_validate", "register"]
