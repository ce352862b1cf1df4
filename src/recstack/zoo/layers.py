"""Dense building blocks of the zoo: MLPs, interactions, attention and recurrent cells.

Every piece of arithmetic a model does lives inside one of these modules (not
in a model's own ``forward``), so that the profiler can place all of it in a
stage.
"""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """Linear layers ``widths[0] -> widths[1] -> ...`` with ReLU between; ``final_relu`` after the last."""

    def __init__(self, widths: list[int], *, final_relu: bool = False) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2 or final_relu:
                layers.append(nn.ReLU())
        self.layers = nn.Sequential(*layers)
        self.widths = list(widths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.to(self.layers[0].weight.dtype))

    def macs(self) -> int:
        return sum(a * b for a, b in zip(self.widths[:-1], self.widths[1:], strict=True))


class ConcatInteraction(nn.Module):
    """DLRM / WnD interaction: concatenate the dense vector with every pooled embedding."""

    def __init__(self, table_names: list[str]) -> None:
        super().__init__()
        self.table_names = list(table_names)

    def forward(self, dense: torch.Tensor | None, embs: dict[str, torch.Tensor]) -> torch.Tensor:
        parts = [embs[n].to(dense.dtype if dense is not None else embs[n].dtype) for n in self.table_names]
        if dense is not None:
            parts.insert(0, dense)
        return torch.cat(parts, dim=1)


class DotInteraction(nn.Module):
    """DLRM dot interaction: pairwise dot products of [dense, emb_1..emb_T] (strictly lower triangle)."""

    def __init__(self, table_names: list[str]) -> None:
        super().__init__()
        self.table_names = list(table_names)
        f = len(table_names) + 1
        li, lj = torch.tril_indices(f, f, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)

    def forward(self, dense: torch.Tensor, embs: dict[str, torch.Tensor]) -> torch.Tensor:
        t = torch.stack([dense] + [embs[n].to(dense.dtype) for n in self.table_names], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        return torch.cat([dense, z[:, self.li, self.lj]], dim=1)


class GMF(nn.Module):
    """NCF's generalised matrix factorisation: the elementwise product of user and item embeddings."""

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        return user * item


class PairMLP(nn.Module):
    """An MLP over the concatenation of two embeddings (NCF's MLP branch)."""

    def __init__(self, widths: list[int]) -> None:
        super().__init__()
        self.mlp = MLP(widths, final_relu=True)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([a, b], dim=1))


class ConcatHead(nn.Module):
    """Concatenate inputs, then an MLP (NCF's final FC; DIN/DIEN's top MLP)."""

    def __init__(self, widths: list[int]) -> None:
        super().__init__()
        self.mlp = MLP(widths)

    def forward(self, *parts: torch.Tensor) -> torch.Tensor:
        dt = self.mlp.layers[0].weight.dtype
        return self.mlp(torch.cat([p.to(dt) for p in parts], dim=1))


class WideLinear(nn.Module):
    """The wide part of Wide & Deep: a linear model over the raw dense features (one logit per task)."""

    def __init__(self, dense_features: int, outputs: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dense_features, outputs)

    def forward(self, dense: torch.Tensor, deep: torch.Tensor | None = None) -> torch.Tensor:
        wide = self.linear(dense.to(self.linear.weight.dtype))
        return wide if deep is None else deep + wide


class TaskTowers(nn.Module):
    """Multi-task heads: one MLP per task over a shared representation, plus the wide logits."""

    def __init__(self, widths: list[int], tasks: int) -> None:
        super().__init__()
        self.towers = nn.ModuleList([MLP(widths) for _ in range(tasks)])

    def forward(self, shared: torch.Tensor, wide: torch.Tensor | None) -> torch.Tensor:
        out = torch.cat([t(shared) for t in self.towers], dim=1)
        return out if wide is None else out + wide


class LocalActivationUnit(nn.Module):
    """DIN: weight each behaviour by an MLP over [behaviour, ad, behaviour*ad]; sum the weighted behaviours.

    Padded positions (beyond each sample's length) get weight 0.
    """

    def __init__(self, widths: list[int]) -> None:
        super().__init__()
        self.mlp = MLP(widths)

    def forward(self, behaviours: torch.Tensor, lengths: torch.Tensor, ad: torch.Tensor) -> torch.Tensor:
        dt = self.mlp.layers[0].weight.dtype
        behaviours, ad = behaviours.to(dt), ad.to(dt)
        b, L, d = behaviours.shape
        q = ad.unsqueeze(1).expand(b, L, d)
        x = torch.cat([behaviours, q, behaviours * q], dim=-1)
        w = self.mlp(x)  # [B, L, 1]
        mask = torch.arange(L, device=behaviours.device).unsqueeze(0) < lengths.unsqueeze(1)
        w = w * mask.unsqueeze(-1).to(w.dtype)
        return (w * behaviours).sum(dim=1)


class InterestExtractor(nn.Module):
    """DIEN: stack the per-step behaviour embeddings and run a GRU (or tanh RNN) over them."""

    def __init__(self, step_tables: list[str], input_dim: int, hidden: int, cell: str) -> None:
        super().__init__()
        self.step_tables = list(step_tables)
        rnn_cls = {"gru": nn.GRU, "rnn": nn.RNN}[cell]
        self.rnn = rnn_cls(input_dim, hidden, batch_first=True)

    def forward(self, embs: dict[str, torch.Tensor]) -> torch.Tensor:
        seq = torch.stack([embs[n] for n in self.step_tables], dim=1).to(self.rnn.weight_ih_l0.dtype)
        out, _ = self.rnn(seq)
        return out  # [B, T, H]


class InterestAttention(nn.Module):
    """DIEN attention: scores_t = softmax_t(<FC(h_t), query>) with query = [ad; context]."""

    def __init__(self, hidden: int, attention_dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(hidden, attention_dim)

    def forward(self, states: torch.Tensor, ad: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        query = torch.cat([ad, context], dim=1).to(states.dtype)
        keys = self.fc(states)  # [B, T, A]
        scores = torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1)  # [B, T]
        return torch.softmax(scores, dim=1)


class AUGRUCell(nn.Module):
    """GRU cell whose update gate is scaled by an attention score (DIEN's AUGRU)."""

    def __init__(self, input_dim: int, hidden: int) -> None:
        super().__init__()
        self.x2h = nn.Linear(input_dim, 3 * hidden)
        self.h2h = nn.Linear(hidden, 3 * hidden)
        self.hidden = hidden

    def forward(self, x: torch.Tensor, h: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        gx = self.x2h(x)
        gh = self.h2h(h)
        xr, xu, xn = gx.chunk(3, dim=1)
        hr, hu, hn = gh.chunk(3, dim=1)
        r = torch.sigmoid(xr + hr)
        u = torch.sigmoid(xu + hu) * att.unsqueeze(1)
        n = torch.tanh(xn + r * hn)
        return (1.0 - u) * h + u * n


class InterestEvolution(nn.Module):
    """DIEN interest evolution over T steps: AUGRU (a Python loop of cells), or GRU/RNN on attention-scaled inputs."""

    def __init__(self, input_dim: int, hidden: int, cell: str) -> None:
        super().__init__()
        self.cell_type = cell
        self.hidden = hidden
        if cell == "augru":
            self.cell = AUGRUCell(input_dim, hidden)
        else:
            self.rnn = {"gru": nn.GRU, "rnn": nn.RNN}[cell](input_dim, hidden, batch_first=True)

    def forward(self, states: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.cell_type == "augru":
            h = states.new_zeros((states.shape[0], self.hidden))
            for t in range(states.shape[1]):
                h = self.cell(states[:, t], h, scores[:, t])
            return h
        _, h_n = self.rnn(states * scores.unsqueeze(-1))
        return h_n[-1]


def rnn_macs(cell: str, input_dim: int, hidden: int) -> int:
    """Multiply-adds of one recurrent step: gates x->h and h->h (3 gates for GRU/AUGRU, 1 for tanh RNN)."""
    gates = 1 if cell == "rnn" else 3
    return gates * (input_dim * hidden + hidden * hidden)
