"""Small models for tests/test_compile.py (factories: ``compile_models:NAME``; (batch_size, seed) -> model, batches).

Lines marked ``# BREAK:<kind>`` are where Dynamo must report a graph break.
"""

from __future__ import annotations

import torch
from torch import nn


class Breaky(nn.Module):
    """A data-dependent branch, a ``.item()`` and a ``print``: three graph breaks, each at its marked line."""

    def __init__(self) -> None:
        super().__init__()
        self.dense_arch = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.over_arch = Head()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.over_arch(self.dense_arch(x))


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 1)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        if y.sum() > 0:  # BREAK:branch
            y = y * 2
        scale = y.mean().item()  # BREAK:item
        print("", end="")  # BREAK:print
        return self.fc(y) + scale


class Tower(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, width)
        self.fc2 = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class Clean(nn.Module):
    """No graph breaks: a dense MLP stage and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.dense_arch = Tower()
        self.over_arch = nn.Sequential(nn.Linear(1, 4), nn.ReLU(), nn.Linear(4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.over_arch(self.dense_arch(x))


def _factory(cls: type[nn.Module]):
    """A recstack factory (batch_size, seed) -> (model, batch_fn) building ``cls`` seeded."""

    def factory(batch_size: int, seed: int):
        torch.manual_seed(seed)
        return cls(), _batches(batch_size, seed)

    return factory


def _batches(batch_size: int, seed: int):
    def batch(i: int) -> torch.Tensor:
        return torch.randn(batch_size, 8, generator=torch.Generator().manual_seed(seed * 1000 + i))

    return batch


breaky = _factory(Breaky)


clean = _factory(Clean)


class Wins(nn.Module):
    """Made to win compiled: eager computes a product it never uses; a compiled graph drops it (dead code)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("w", torch.randn(512, 512))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _unused = self.w @ self.w @ self.w
        return self.fc(x)


class Loses(nn.Module):
    """Made to lose compiled: the traced graph computes a product that eager skips."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 1)
        self.register_buffer("w", torch.randn(512, 512))

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            y = y + (self.w @ self.w @ self.w).sum() * 0.0
        return self.fc(y)


class Mixed(nn.Module):
    """A stage that gains compiled (dense) beside one that loses (head), for --recommend's selection."""

    def __init__(self) -> None:
        super().__init__()
        self.dense_arch = Wins()
        self.over_arch = Loses()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.over_arch(self.dense_arch(x))


mixed = _factory(Mixed)


wins = _factory(Wins)
