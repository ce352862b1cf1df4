"""The Profile tree: one plain-data contract between collectors, analyses and renderers.

A Profile is a versioned document (see docs/profile-schema.md). Nodes form one
tree ``run -> stage -> module -> op (-> kernel)``; every node carries time,
call count and the cost fields (``flops``, ``bytes``, ``intensity``: null
until the cost model fills them, never 0 for unknown). Saving and loading is
lossless: ``Profile.from_dict(p.to_dict()) == p``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recstack.config.loading import read_json_file
from recstack.errors import DataError

SCHEMA = "recstack.profile"
SCHEMA_VERSION = 1
LEVELS = ("run", "stage", "module", "op", "kernel")
NODE_KEYS = (
    "name",
    "path",
    "level",
    "stage",
    "time_s",
    "self_time_s",
    "calls",
    "flops",
    "bytes",
    "intensity",
)


@dataclass
class Node:
    name: str
    path: str
    level: str
    stage: str | None
    time_s: float
    self_time_s: float = 0.0
    calls: int = 0
    flops: float | None = None
    bytes: float | None = None
    intensity: float | None = None
    children: list[Node] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, path: str) -> Node | None:
        for n in self.walk():
            if n.path == path:
                return n
        return None

    def child(self, name: str) -> Node | None:
        for c in self.children:
            if c.name == name:
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: getattr(self, k) for k in NODE_KEYS}
        d.update(self.extra)
        d["children"] = [c.to_dict() for c in self.children]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "root") -> Node:
        try:
            kw = {k: d[k] for k in NODE_KEYS}
        except KeyError as exc:
            raise DataError(f"profile node {where}: missing key {exc.args[0]!r}") from None
        if kw["level"] not in LEVELS:
            raise DataError(f"profile node {where}: level {kw['level']!r} is not one of {', '.join(LEVELS)}")
        extra = {k: v for k, v in d.items() if k not in NODE_KEYS and k != "children"}
        children = [cls.from_dict(c, f"{where}/{i}") for i, c in enumerate(d.get("children", []))]
        return cls(**kw, children=children, extra=extra)


@dataclass
class Profile:
    run_id: str
    run: dict[str, Any]
    environment: dict[str, Any]
    overhead: dict[str, Any]
    root: Node
    ranks: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "run": self.run,
            "environment": self.environment,
            "overhead": self.overhead,
            "ranks": self.ranks,
            "root": self.root.to_dict(),
        }
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "profile") -> Profile:
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise DataError(f"{source}: not a recstack profile (schema must be {SCHEMA!r})")
        ver = d.get("schema_version")
        if not isinstance(ver, int) or ver > SCHEMA_VERSION:
            raise DataError(
                f"{source}: schema_version {ver!r} is not supported (this recstack reads <= {SCHEMA_VERSION}); "
                "upgrade recstack"
            )
        known = {"schema", "schema_version", "run_id", "run", "environment", "overhead", "ranks", "root"}
        try:
            return cls(
                run_id=d["run_id"],
                run=d["run"],
                environment=d["environment"],
                overhead=d["overhead"],
                ranks=d.get("ranks", []),
                root=Node.from_dict(d["root"]),
                extra={k: v for k, v in d.items() if k not in known},
            )
        except KeyError as exc:
            raise DataError(f"{source}: missing top-level key {exc.args[0]!r}") from None

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        return cls.from_dict(read_json_file(path, "profile"), source=str(path))

    def nodes(self) -> Iterator[Node]:
        return self.root.walk()

    def stage(self, name: str) -> Node | None:
        return self.root.child(name)

    def stage_shares(self) -> dict[str, float]:
        total = self.root.time_s or 1.0
        return {c.name: c.time_s / total for c in self.root.children}
