"""The Profile tree: one plain-data contract between collectors, analyses and renderers.

A Profile is a versioned document (see docs/profile-schema.md; the typed
contract is :mod:`recstack.schema`). Nodes form one tree
``run -> stage -> module -> op (-> kernel)``; every node carries time, call
count and the cost fields (``flops``, ``bytes``, ``intensity``: null until the
cost model fills them, never 0 for unknown). Saving and loading is lossless:
``Profile.from_dict(p.to_dict()) == p``. Every load is validated against the
contract (the first bad field is named in a DataError); an older version is
upgraded in memory and says so in ``Profile.notes``. Saving is atomic.
The optional keys of a node and of a profile (kept in ``extra``, written as
they are) are read and written as typed attributes (``node.roofline``,
``profile.machine``: :mod:`recstack.schema.sections`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recstack.outputs import atomic_write_text
from recstack.schema.constants import LEVELS, MAX_TREE_DEPTH, SCHEMA, SCHEMA_VERSION  # noqa: F401 (re-exported)
from recstack.schema.sections import NodeSections, ProfileSections

# The pydantic models (recstack.schema.validate) load when a profile is read, never to write one.

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
class Node(NodeSections):
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
    def from_dict(cls, d: dict[str, Any]) -> Node:
        """A node tree from a dict that :func:`recstack.schema.check_profile` has validated."""
        extra = {k: v for k, v in d.items() if k not in NODE_KEYS and k != "children"}
        children = [cls.from_dict(c) for c in d.get("children", [])]
        return cls(**{k: d[k] for k in NODE_KEYS}, children=children, extra=extra)


def single_process_ranks() -> list[dict[str, Any]]:
    """``ranks`` of a single-process profile: rank 0, whose tree is the top-level ``root`` (``root: null``)."""
    return [{"rank": 0, "root": None, "shards": []}]


@dataclass
class Profile(ProfileSections):
    run_id: str
    run: dict[str, Any]
    environment: dict[str, Any]
    overhead: dict[str, Any]
    root: Node
    ranks: list[dict[str, Any]] = field(default_factory=single_process_ranks)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what loading said (an upgrade); never saved

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
        """Validate ``d`` against the contract (DataError naming the first bad field) and build the Profile.

        An older version is upgraded in memory; ``notes`` says so.
        """
        from recstack.schema.validate import check_profile

        d, notes = check_profile(d, source)
        known = {"schema", "schema_version", "run_id", "run", "environment", "overhead", "ranks", "root"}
        return cls(
            run_id=d["run_id"],
            run=d["run"],
            environment=d["environment"],
            overhead=d["overhead"],
            ranks=d["ranks"],
            root=Node.from_dict(d["root"]),
            extra={k: v for k, v in d.items() if k not in known},
            notes=notes,
        )

    def save(self, path: str | Path) -> Path:
        """Write the profile JSON atomically (a temporary file renamed over ``path``)."""
        import msgspec

        # The same text as json.dumps(indent=1), ~9x faster: json's C encoder writes compact text (its indenting
        # encoder is pure Python: 0.19 s for a 3 MB profile), msgspec indents it, every value's text kept.
        text = msgspec.json.format(json.dumps(self.to_dict(), allow_nan=False).encode(), indent=1).decode()
        return atomic_write_text(path, text + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        """Read and validate a profile file; notes (an upgraded older version) go to stderr."""
        from recstack.schema.validate import read_profile_json

        data = read_profile_json(path)
        prof = cls.from_dict(data, source=str(path))
        for note in prof.notes:
            print(f"note: {note}", file=sys.stderr)
        return prof

    @property
    def stats_version(self) -> int:
        """The schema version this profile's figures were measured under (older when upgraded)."""
        from recstack.schema.validate import stats_version

        return stats_version(self.extra | {"schema_version": SCHEMA_VERSION})

    @property
    def time_statistic(self) -> str:
        """What the run and stage times are: ``interquartile mean`` (version 2) or ``median`` (old files)."""
        from recstack.schema.validate import time_statistic

        return time_statistic(self.extra)

    def nodes(self) -> Iterator[Node]:
        return self.root.walk()

    def stage(self, name: str) -> Node | None:
        return self.root.child(name)

    def stage_shares(self) -> dict[str, float]:
        total = self.root.time_s or 1.0
        return {c.name: c.time_s / total for c in self.root.children}
