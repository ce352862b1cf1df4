"""Regenerate README.md's generated blocks from the code: the command synopsis and the exit codes.

    python scripts/gen_synopsis.py          # rewrite README.md
    python scripts/gen_synopsis.py --check  # exit 1 if README.md is stale

Each block sits between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from recstack.cli import exit_code_table, synopsis  # noqa: E402

README = ROOT / "README.md"


def blocks() -> dict[str, str]:
    return {"synopsis": "```\n" + synopsis() + "```\n", "exit-codes": exit_code_table()}


def render(text: str) -> str:
    for name, body in blocks().items():
        pattern = re.compile(rf"(<!-- generated:{name} -->\n).*?(<!-- /generated:{name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"README.md has no <!-- generated:{name} --> block")
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), text)
    return text


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in argv:
        if new != text:
            print("README.md is stale: run python scripts/gen_synopsis.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
