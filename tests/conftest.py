"""Shared test fixtures: tiny real models and real batches (no mocks)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent (it sits beside the repository)")
    return SHARED_DATA
