"""Tiny models from public recommendation libraries, each with a different layout, and batches for them.

Used by tests/test_public_models.py and benchmarks/bench_public_models.py. The
libraries are pinned in pyproject's `public-models` extra and installed by
`make setup` with `--no-deps`. Nothing here downloads anything.

* deepctr-torch DeepFM: 26 `nn.Embedding` tables in an `nn.ModuleDict`
  (`embedding_dict`, plus the linear part's own dict), looked up from the
  model's own forward, input one float tensor of columns.
* deepctr-torch DIN: the same tables; attention in `AttentionSequencePoolingLayer`.
* torch-rechub DIN: tables in `EmbeddingLayer.embed_dict`, one `ActivationUnit`
  per behaviour sequence in an `nn.ModuleList` called element by element,
  input a dict of tensors.
* TorchRec DLRM: an `EmbeddingBagCollection` fed a `KeyedJaggedTensor`.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

Batch = Callable[[int], Any]


def _import_deepctr() -> types.ModuleType:
    """Import deepctr_torch without its import-time version check, which fetches PyPI's JSON in a thread.

    The check calls ``requests.get``; for the import, ``requests`` is a module
    whose ``get`` raises, so the thread fails at once (deepctr catches it) and
    nothing leaves the machine. The real ``requests`` (if any) is restored after.
    """
    if "deepctr_torch" in sys.modules:
        return sys.modules["deepctr_torch"]
    offline = types.ModuleType("requests")

    def get(*_a: Any, **_k: Any) -> Any:
        raise OSError("offline: recstack tests make no network requests")

    offline.get = get  # type: ignore[attr-defined]
    saved = sys.modules.get("requests")
    sys.modules["requests"] = offline
    try:
        return importlib.import_module("deepctr_torch")
    finally:
        if saved is None:
            sys.modules.pop("requests", None)
        else:
            sys.modules["requests"] = saved


def deepctr_deepfm(batch: int = 32, tables: int = 26, dense: int = 13, rows: int = 50) -> tuple[nn.Module, Batch]:
    _import_deepctr()
    from deepctr_torch.inputs import DenseFeat, SparseFeat
    from deepctr_torch.models import DeepFM

    feats = [SparseFeat(f"C{i}", rows, embedding_dim=4) for i in range(tables)]
    feats += [DenseFeat(f"I{i}", 1) for i in range(dense)]
    torch.manual_seed(0)
    model = DeepFM(feats, feats, task="binary", device="cpu", dnn_hidden_units=(16, 8))

    def make(i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(i)
        return torch.cat([torch.randint(0, rows, (batch, tables), generator=g).float(),
                          torch.rand(batch, dense, generator=g)], 1)

    return model, make


def deepctr_din(batch: int = 32, seq: int = 10, rows: int = 50) -> tuple[nn.Module, Batch]:
    _import_deepctr()
    from deepctr_torch.inputs import SparseFeat, VarLenSparseFeat
    from deepctr_torch.models import DIN

    feats = [SparseFeat("user", rows, embedding_dim=4), SparseFeat("item", rows, embedding_dim=4),
             SparseFeat("cate", rows, embedding_dim=4),
             VarLenSparseFeat(SparseFeat("hist_item", rows, embedding_dim=4, embedding_name="item"), maxlen=seq,
                              length_name="seq_length"),
             VarLenSparseFeat(SparseFeat("hist_cate", rows, embedding_dim=4, embedding_name="cate"), maxlen=seq,
                              length_name="seq_length")]
    torch.manual_seed(0)
    model = DIN(feats, ["item", "cate"], device="cpu", dnn_hidden_units=(16, 8), att_hidden_size=(8, 4))

    def make(i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(1, rows, (batch, 3 + 2 * seq), generator=g).float()
        lengths = torch.randint(1, seq + 1, (batch, 1), generator=g).float()
        return torch.cat([ids, lengths], 1)  # user, item, cate, hist_item[seq], hist_cate[seq], seq_length

    return model, make


def rechub_din(batch: int = 32, seq: int = 10, rows: int = 50, sequences: int = 2) -> tuple[nn.Module, Batch]:
    from torch_rechub.basic.features import SequenceFeature, SparseFeature
    from torch_rechub.models.ranking import DIN

    features = [SparseFeature("user", rows, embed_dim=4), SparseFeature("age", 10, embed_dim=4)]
    targets = [SparseFeature(f"target_{k}", rows, embed_dim=4) for k in range(sequences)]
    history = [SequenceFeature(f"hist_{k}", rows, embed_dim=4, pooling="concat", shared_with=f"target_{k}")
               for k in range(sequences)]
    torch.manual_seed(0)
    model = DIN(features, history, targets, mlp_params={"dims": [16, 8]}, attention_mlp_params={"dims": [8]})

    def make(i: int) -> tuple[dict[str, torch.Tensor]]:
        g = torch.Generator().manual_seed(i)
        x = {"user": torch.randint(0, rows, (batch,), generator=g), "age": torch.randint(0, 10, (batch,), generator=g)}
        for k in range(sequences):
            x[f"target_{k}"] = torch.randint(0, rows, (batch,), generator=g)
            x[f"hist_{k}"] = torch.randint(0, rows, (batch, seq), generator=g)
        return (x,)  # a tuple: DIN.forward takes the dict as one positional argument

    return model, make


def torchrec_dlrm(batch: int = 16, tables: int = 3, rows: int = 100) -> tuple[nn.Module, Batch]:
    from torchrec.models.dlrm import DLRM
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    cfgs = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=8, num_embeddings=rows, feature_names=[f"f{i}"])
            for i in range(tables)]
    torch.manual_seed(0)
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(tables=cfgs), dense_in_features=4,
                 dense_arch_layer_sizes=[16, 8], over_arch_layer_sizes=[16, 1])

    def make(i: int) -> tuple[torch.Tensor, Any]:
        g = torch.Generator().manual_seed(i)
        lengths = torch.randint(0, 4, (tables * batch,), generator=g)
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=[f"f{t}" for t in range(tables)],
            values=torch.randint(0, rows, (int(lengths.sum()),), generator=g), lengths=lengths)
        return (torch.rand(batch, 4, generator=g), kjt)

    return model, make


# name -> (import name, builder, stages the profile must have)
MODELS: dict[str, tuple[str, Callable[..., tuple[nn.Module, Batch]], set[str]]] = {
    "deepctr-deepfm": ("deepctr_torch", deepctr_deepfm, {"embedding", "interaction", "dense", "head"}),
    "deepctr-din": ("deepctr_torch", deepctr_din, {"embedding", "sequence"}),
    "rechub-din": ("torch_rechub", rechub_din, {"embedding", "sequence"}),
    "torchrec-dlrm": ("torchrec", torchrec_dlrm, {"embedding", "dense", "interaction", "head"}),
}
