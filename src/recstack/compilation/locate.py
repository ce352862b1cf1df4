"""Where a user source line sits in a model: the innermost module whose class ``forward`` holds the line."""

from __future__ import annotations

import inspect
import os
from typing import Any

from torch import nn

from recstack.compilation.config import WHOLE

MODEL = "<model>"  # how reports name the whole-model region


class SourceIndex:
    """Module path -> (file, first line, last line) of its class's ``forward``; ``locate`` for the observer."""

    def __init__(self, model: nn.Module, stage_of: Any = None) -> None:
        self.spans: list[tuple[str, str, int, int]] = []
        self.stage_of = stage_of or (lambda _p: None)
        for path, mod in model.named_modules():
            fwd = getattr(type(mod), "forward", None)
            try:
                lines, first = inspect.getsourcelines(fwd)
                file = os.path.realpath(inspect.getsourcefile(fwd) or "")
            except (OSError, TypeError):
                continue
            self.spans.append((path, file, first, first + len(lines) - 1))

    def module_at(self, file: str, line: int, region: str | None) -> str | None:
        """The deepest module (inside ``region`` when given) whose forward's source holds ``file:line``."""
        real = os.path.realpath(file)
        best: str | None = None
        for path, f, lo, hi in self.spans:
            if f != real or not lo <= line <= hi:
                continue
            if region not in (None, WHOLE, MODEL) and not (path == region or path.startswith(region + ".")):
                continue
            if best is None or path.count(".") > best.count(".") or (best == "" and path):
                best = path
        return best

    def locate(self, file: str, line: int, region: str | None) -> tuple[str | None, str | None]:
        path = self.module_at(file, line, region)
        if path is None:
            path = region
        elif path == WHOLE:
            path = MODEL
        return path, (self.stage_of(path) if path is not None else None)


__all__ = ["SourceIndex"]
