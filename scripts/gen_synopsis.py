"""Regenerate the docs' generated blocks from the code: facts a hand-written doc would let go stale.

    python scripts/gen_synopsis.py          # rewrite README.md and docs/*.md
    python scripts/gen_synopsis.py --check  # exit 1 if any of them is stale

Each block sits between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` (on their own lines for a
block, inline within a sentence for a phrase). Blocks: the command synopsis, the exit codes, the zoo ids and
their count, the ranges of model configs and run options, and error texts the docs quote.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from recstack.cli import exit_code_table, synopsis  # noqa: E402


def _zoo_ids() -> str:
    from recstack.zoo.config import BUILTIN

    return " ".join(f"`{m}`" for m in BUILTIN)


def _zoo_count() -> str:
    from recstack.zoo.config import BUILTIN

    return str(len(BUILTIN))


def _pow(x: float) -> str:
    """10^12, 2^31-1 or 65,536: as a reader recognises the bound."""
    x = int(x)
    for base in (10, 2):
        for exp in range(3, 64):
            if x == base**exp and exp > (5 if base == 10 else 20):
                return f"{base}^{exp}"
            if base == 2 and x == base**exp - 1 and exp > 20:
                return f"2^{exp}-1"
    return f"{x:,}"


def _ranges() -> str:
    from recstack.config import limits as L
    from recstack.config.run import SCALE_MAX

    rows = [
        ("`embedding_dim`, a table's `dim`", f"1 .. {_pow(L.EMBEDDING_DIM_MAX)}"),
        ("a table's `rows` (also after `scale`)", f"1 .. {_pow(L.TABLE_ROWS_MAX)}"),
        ("a group's `count`; tables in all", f"1 .. {_pow(L.TABLE_COUNT_MAX)}"),
        ("`pooling`, `max_length`", f"> 0 .. {_pow(L.SIZE_MAX)} (lengths are int32)"),
        ("every layer width (`*_mlp` entries, `attention_hidden`, `attention_dim`, `extractor_hidden`)",
         f"1 .. {_pow(L.LAYER_WIDTH_MAX)}; at most {_pow(L.LAYERS_MAX)} entries per list"),
        ("`dense_features`", f"0 .. {_pow(L.DENSE_FEATURES_MAX)}"),
        ("`tasks` (and `--tasks`)", f"1 .. {_pow(L.TASKS_MAX)}"),
        ("`scale` in a model config", f"> 0 .. {_pow(L.CONFIG_SCALE_MAX)}"),
        ("`--scale` (`RunConfig.scale`; multiplies the config's `scale`)",
         f"> 0 .. {_pow(SCALE_MAX)}, and no table above {_pow(L.TABLE_ROWS_MAX)} rows "
         "(the error names the largest `--scale` that fits)"),
    ]
    return "| field | range |\n|---|---|\n" + "".join(f"| {f} | {r} |\n" for f, r in rows)


def _cli_error(argv: list[str]) -> Callable[[], str]:
    """The one error line the CLI prints for ``argv`` (run in-process; it must fail before any work)."""

    def text() -> str:
        import contextlib
        import io

        from recstack.cli import main

        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
        line = err.getvalue().strip().splitlines()[0]
        assert code == 2 and line.startswith("error: "), (argv, code, line)
        return f"`{line}`"

    return text


DOCS: dict[str, dict[str, Callable[[], str]]] = {
    "README.md": {
        "synopsis": lambda: "```\n" + synopsis() + "```\n",
        "exit-codes": exit_code_table,
        "zoo-ids": _zoo_ids,
    },
    "docs/zoo.md": {"zoo-count": _zoo_count, "zoo-ids": _zoo_ids, "ranges": _ranges},
    "docs/workloads.md": {
        "batch-size-error": _cli_error(["workload", "stats", "--preset", "production", "--batch-size", "0"]),
    },
}


def render(text: str, blocks: dict[str, Callable[[], str]], where: str = "README.md") -> str:
    for name, make in blocks.items():
        pattern = re.compile(rf"(<!-- generated:{name} -->\n?).*?(<!-- /generated:{name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{where} has no <!-- generated:{name} --> block")
        body = make()
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), text)
    return text


def main(argv: list[str]) -> int:
    stale = []
    for rel, blocks in DOCS.items():
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        new = render(text, blocks, rel)
        if new == text:
            continue
        stale.append(rel)
        if "--check" not in argv:
            path.write_text(new, encoding="utf-8")
    if stale and "--check" in argv:
        print(f"{', '.join(stale)} stale: run python scripts/gen_synopsis.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
