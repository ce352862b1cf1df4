"""The stage-detection reference set: tiny models from public recommendation libraries, and batches.

Four libraries, installed by `make setup` (`--no-deps`): deepctr-torch 0.3.0, torch-rechub 0.9.0,
pytorch-fm (`torchfm`) 0.7.0 and TorchRec's own models. Nothing here downloads anything. Each builder
returns ``(model, batch)``; the batch is what the model's forward takes (a tuple is positional
arguments). Sizes are tiny and chosen so that no sequence length equals an embedding or layer width
(the sequence test looks for the time axis by its length).

The expected stage of each model's major modules is written down in tests/test_stage_reference.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from _public_models import _import_deepctr
from torch import nn

Built = tuple[nn.Module, Any]
B, ROWS, SEQ = 8, 30, 7  # batch, table rows, behaviour-sequence length


# -- deepctr-torch: one float matrix of columns (sparse IDs as floats, then dense values) ------------------
def _deepctr(model: str, sparse: int = 5, dense: int = 2, **kw: Any) -> Built:
    _import_deepctr()
    import deepctr_torch.models as m
    from deepctr_torch.inputs import DenseFeat, SparseFeat

    feats = [SparseFeat(f"C{i}", ROWS, embedding_dim=4) for i in range(sparse)]
    feats += [DenseFeat(f"I{i}", 1) for i in range(dense)]
    torch.manual_seed(0)
    cls = getattr(m, model)
    net = cls(feats, **kw) if model == "PNN" else cls(feats, feats, **kw)
    g = torch.Generator().manual_seed(1)
    x = torch.cat([torch.randint(0, ROWS, (B, sparse), generator=g).float(), torch.rand(B, dense, generator=g)], 1)
    return net, (x,)


def deepctr_deepfm() -> Built:
    return _deepctr("DeepFM", dnn_hidden_units=(16, 8))


def deepctr_xdeepfm() -> Built:
    return _deepctr("xDeepFM", dnn_hidden_units=(16, 8), cin_layer_size=(6, 6))


def deepctr_afm() -> Built:
    return _deepctr("AFM", dense=0, attention_factor=6)


def deepctr_nfm() -> Built:
    return _deepctr("NFM", dnn_hidden_units=(16, 8))


def deepctr_dcn() -> Built:
    return _deepctr("DCN", cross_num=2, dnn_hidden_units=(16, 8))


def deepctr_pnn() -> Built:
    return _deepctr("PNN", dense=0, dnn_hidden_units=(16, 8))


def deepctr_autoint() -> Built:
    return _deepctr("AutoInt", att_layer_num=2, att_head_num=2, dnn_hidden_units=(16, 8))


def deepctr_wdl() -> Built:
    return _deepctr("WDL", dnn_hidden_units=(16, 8))


def deepctr_din() -> Built:
    _import_deepctr()
    from _public_models import deepctr_din as build

    net, make = build(batch=B, seq=SEQ, rows=ROWS)
    return net, (make(1),)


# -- torch-rechub: a dict of tensors, one positional argument ---------------------------------------------
def _rechub_sparse(n: int, prefix: str = "f") -> list[Any]:
    from torch_rechub.basic.features import SparseFeature

    return [SparseFeature(f"{prefix}{i}", ROWS, embed_dim=4) for i in range(n)]


def _rechub_batch(names: list[str], seqs: list[str] = ()) -> tuple[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    x = {n: torch.randint(1, ROWS, (B,), generator=g) for n in names}
    x.update({n: torch.randint(1, ROWS, (B, SEQ), generator=g) for n in seqs})
    return (x,)


def rechub_deepfm() -> Built:
    from torch_rechub.models.ranking import DeepFM

    feats = _rechub_sparse(4)
    torch.manual_seed(0)
    net = DeepFM(deep_features=feats, fm_features=feats, mlp_params={"dims": [16, 8]})
    return net, _rechub_batch([f.name for f in feats])


def rechub_afm() -> Built:
    from torch_rechub.models.ranking import AFM

    feats = _rechub_sparse(4)
    torch.manual_seed(0)
    net = AFM(fm_features=feats, embed_dim=4, t=6)
    return net, _rechub_batch([f.name for f in feats])


def rechub_dcnv2() -> Built:
    from torch_rechub.models.ranking import DCNv2

    feats = _rechub_sparse(4)
    torch.manual_seed(0)
    net = DCNv2(feats, n_cross_layers=2, mlp_params={"dims": [16, 8]}, model_structure="parallel",
                use_low_rank_mixture=False)
    return net, _rechub_batch([f.name for f in feats])


def rechub_din() -> Built:
    from _public_models import rechub_din as build

    net, make = build(batch=B, seq=SEQ, rows=ROWS)
    return net, make(1)


def rechub_mmoe() -> Built:
    from torch_rechub.models.multi_task import MMOE

    feats = _rechub_sparse(4)
    torch.manual_seed(0)
    net = MMOE(feats, ["classification", "classification"], n_expert=3, expert_params={"dims": [16]},
               tower_params_list=[{"dims": [8]}, {"dims": [8]}])
    return net, _rechub_batch([f.name for f in feats])


def rechub_dssm() -> Built:
    from torch_rechub.models.matching import DSSM

    user, item = _rechub_sparse(3, "u"), _rechub_sparse(2, "i")
    torch.manual_seed(0)
    net = DSSM(user, item, user_params={"dims": [16, 8]}, item_params={"dims": [16, 8]})
    return net, _rechub_batch([f.name for f in user + item])


def rechub_gru4rec() -> Built:
    from torch_rechub.basic.features import SequenceFeature, SparseFeature
    from torch_rechub.models.matching import GRU4Rec

    user = [SparseFeature("user", ROWS, embed_dim=4)]
    hist = [SequenceFeature("hist", ROWS, embed_dim=4, pooling="concat", shared_with="item")]
    item = [SparseFeature("item", ROWS, embed_dim=4)]
    neg = [SequenceFeature("neg", ROWS, embed_dim=4, pooling="concat", shared_with="item")]
    torch.manual_seed(0)
    net = GRU4Rec(user, hist, item, neg, user_params={"dims": [16, 4]})
    g = torch.Generator().manual_seed(1)
    x = {"user": torch.randint(1, ROWS, (B,), generator=g), "item": torch.randint(1, ROWS, (B,), generator=g),
         "hist": torch.randint(1, ROWS, (B, SEQ), generator=g), "neg": torch.randint(1, ROWS, (B, 3), generator=g)}
    return net, (x,)


def rechub_sasrec() -> Built:
    from torch_rechub.basic.features import SequenceFeature
    from torch_rechub.models.matching import SASRec

    feats = [SequenceFeature(n, ROWS, embed_dim=6, pooling="concat", shared_with=None if n == "seq" else "seq")
             for n in ("seq", "pos", "neg")]
    torch.manual_seed(0)
    net = SASRec(feats, max_len=SEQ, dropout_rate=0.0, num_blocks=1, num_heads=1)
    return net, _rechub_batch([], ["seq", "pos", "neg"])


# -- pytorch-fm: one LongTensor [batch, fields] of per-field IDs, offset into one table by the model ---------
FM_FIELDS = 5


def _torchfm(file: str, model: str, *args: Any) -> Built:
    import importlib

    cls = getattr(importlib.import_module(f"torchfm.model.{file}"), model)
    torch.manual_seed(0)
    net = cls([ROWS] * FM_FIELDS, 4, *args)
    g = torch.Generator().manual_seed(1)
    return net, (torch.randint(0, ROWS, (B, FM_FIELDS), generator=g),)


def torchfm_deepfm() -> Built:
    return _torchfm("dfm", "DeepFactorizationMachineModel", (16, 8), 0.0)


def torchfm_xdeepfm() -> Built:
    return _torchfm("xdfm", "ExtremeDeepFactorizationMachineModel", (16, 8), 0.0, (6, 6))


def torchfm_afm() -> Built:
    return _torchfm("afm", "AttentionalFactorizationMachineModel", 6, (0.0, 0.0))


def torchfm_nfm() -> Built:
    return _torchfm("nfm", "NeuralFactorizationMachineModel", (16, 8), (0.0, 0.0))


def torchfm_wdl() -> Built:
    return _torchfm("wd", "WideAndDeepModel", (16, 8), 0.0)


# -- TorchRec: its own model classes ----------------------------------------------------------------------
def torchrec_dlrm() -> Built:
    from _public_models import torchrec_dlrm as build

    net, make = build(batch=B, tables=3, rows=ROWS)
    return net, make(1)


def torchrec_deepfm() -> Built:
    from torchrec.models.deepfm import SimpleDeepFMNN
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    _, make = torchrec_dlrm_parts()
    cfgs = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=8, num_embeddings=ROWS, feature_names=[f"f{i}"])
            for i in range(3)]
    torch.manual_seed(0)
    net = SimpleDeepFMNN(num_dense_features=4, embedding_bag_collection=EmbeddingBagCollection(tables=cfgs),
                         hidden_layer_size=16, deep_fm_dimension=6)
    return net, make(1)


def torchrec_dlrm_parts() -> tuple[None, Callable[[int], Any]]:
    from _public_models import torchrec_dlrm as build

    _, make = build(batch=B, tables=3, rows=ROWS)
    return None, make


BUILDERS: dict[str, Callable[[], Built]] = {
    "deepctr.DeepFM": deepctr_deepfm, "deepctr.xDeepFM": deepctr_xdeepfm, "deepctr.AFM": deepctr_afm,
    "deepctr.NFM": deepctr_nfm, "deepctr.DCN": deepctr_dcn, "deepctr.PNN": deepctr_pnn,
    "deepctr.AutoInt": deepctr_autoint, "deepctr.WDL": deepctr_wdl, "deepctr.DIN": deepctr_din,
    "rechub.DeepFM": rechub_deepfm, "rechub.AFM": rechub_afm, "rechub.DCNv2": rechub_dcnv2,
    "rechub.DIN": rechub_din, "rechub.MMOE": rechub_mmoe, "rechub.DSSM": rechub_dssm,
    "rechub.GRU4Rec": rechub_gru4rec, "rechub.SASRec": rechub_sasrec,
    "torchfm.DeepFM": torchfm_deepfm, "torchfm.xDeepFM": torchfm_xdeepfm, "torchfm.AFM": torchfm_afm,
    "torchfm.NFM": torchfm_nfm, "torchfm.WDL": torchfm_wdl,
    "torchrec.DLRM": torchrec_dlrm, "torchrec.SimpleDeepFMNN": torchrec_deepfm,
}
