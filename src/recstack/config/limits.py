"""Documented ranges of recstack's integer inputs, in one place.

Every model-config, workload-spec and run option that sizes an allocation has
an upper bound here, so that a typo (``embedding_dim: 1e29``, ``--scale 1e300``)
is refused with a one-line error before anything is allocated, instead of
overflowing a storage size deep inside PyTorch. The bounds are generous: far
above any real recommendation model, well below what would overflow int64
byte counts. Whether a request within range also fits in this host's memory is
the memory preflight's job (:mod:`recstack.zoo.memory`, with the prediction of
:mod:`recstack.zoo.footprint.predict` that ``recstack memory`` reports).
"""

from __future__ import annotations

import os

from recstack.errors import MemoryPreflightError

SEED_MIN = 0
SEED_MAX = 2**63 - 1
"""Seeds: 0 .. 2**63-1 (numpy and torch both accept any non-negative int64). One rule for every command."""

BATCH_SIZE_MAX = 2**24
"""Samples per batch (RunConfig.batch_size, workload stats --batch-size, BuildOptions); 16.7M, far above serving
and training batches (a larger batch is refused here; whether a smaller one fits is the preflight's call)."""

TABLE_ROWS_MAX = 10**12
"""Rows of one embedding table, after ``scale`` (the largest production tables hold ~1e10)."""

TABLE_COUNT_MAX = 100_000
"""Tables in one group (``count``) and in one model."""

EMBEDDING_DIM_MAX = 65_536
"""Embedding width (``embedding_dim``, a table's ``dim``)."""

LAYER_WIDTH_MAX = 1_048_576
"""Width of one dense layer (an MLP entry, ``attention_dim``, ``extractor_hidden``)."""

LAYERS_MAX = 1_000
"""Entries of one layer list (``[in, h1, ..., out]``)."""

DENSE_FEATURES_MAX = 1_048_576
"""Dense (continuous) input features of a model."""

TASKS_MAX = 1_024
"""Tasks of a multi-task model (config ``tasks`` and ``--tasks``)."""

SIZE_MAX = 2**31 - 1
"""Per-sample sizes (pooling factors, sequence lengths, ``max_length``, query sizes): lengths are int32."""

CONFIG_SCALE_MAX = 1e6
"""``scale`` of a model config (rows are also checked against TABLE_ROWS_MAX after scaling)."""

CONFIG_BYTES_MAX = 8 * 2**20
"""Largest YAML config file read (model configs, workload specs, run configs): 8 MiB."""

YAML_NODES_MAX = 1_000_000
"""Largest YAML document after alias expansion (counted before constructing: alias bombs)."""

YAML_DEPTH_MAX = 200
"""Deepest nesting of a YAML document."""


USABLE_FRACTION = 0.9
"""Share of the available memory a preflight lets one run plan to use."""


def available_bytes() -> int:
    """Memory a new allocation can use now: RECSTACK_MEMORY_LIMIT (bytes) if set, else MemAvailable."""
    limit = os.environ.get("RECSTACK_MEMORY_LIMIT")
    if limit:
        try:
            return int(float(limit))
        except ValueError:
            raise MemoryPreflightError(f"RECSTACK_MEMORY_LIMIT must be a number of bytes (got {limit!r})") from None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def gib(n: float) -> str:
    """Bytes as GiB with two decimals (preflight messages)."""
    return f"{n / 2**30:.2f} GiB"
