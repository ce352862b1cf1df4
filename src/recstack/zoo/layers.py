"""Dense building blocks of the zoo: MLPs, interactions, attention and recurrent cells.

Every piece of arithmetic a model does lives inside one of these modules (not
in a model's own ``forward``), so that the profiler can place all of it in a
stage.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
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


class LowRankCrossNet(nn.Module):
    """DCNv2 cross layers, low rank: ``x_{l+1} = x_0 * (U_l (V_l x_l) + b_l) + x_l`` (Wang et al., 2021).

    ``V_l``: width -> rank (no bias), ``U_l``: rank -> width (with bias); as in the MLPerf DLRM-DCNv2 reference.
    """

    def __init__(self, width: int, layers: int, rank: int) -> None:
        super().__init__()
        self.down = nn.ModuleList([nn.Linear(width, rank, bias=False) for _ in range(layers)])
        self.up = nn.ModuleList([nn.Linear(rank, width) for _ in range(layers)])
        self.width, self.layers, self.rank = width, layers, rank

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for down, up in zip(self.down, self.up, strict=True):
            x = x0 * up(down(x)) + x
        return x

    def macs(self) -> int:
        # two matmuls per layer, plus the elementwise product with x_0
        return self.layers * (2 * self.width * self.rank + self.width)


class DCNInteraction(nn.Module):
    """DLRM-DCNv2 interaction: concatenate [dense, emb_1..emb_T] and run the low-rank cross layers over it."""

    def __init__(self, table_names: list[str], width: int, layers: int, rank: int) -> None:
        super().__init__()
        self.concat = ConcatInteraction(table_names)
        self.crossnet = LowRankCrossNet(width, layers, rank)

    def forward(self, dense: torch.Tensor, embs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.crossnet(self.concat(dense, embs))


class DenseFieldEmbedding(nn.Module):
    """DeepFM's numeric fields: field i's value scales its own factor vector v_i and first-order weight w_i."""

    def __init__(self, fields: int, factors: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(factors)
        self.factors = nn.Parameter(torch.empty(fields, factors).uniform_(-bound, bound))
        self.weights = nn.Parameter(torch.empty(fields).uniform_(-bound, bound))

    def forward(self, dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = dense.to(self.factors.dtype)
        return x.unsqueeze(-1) * self.factors, (x * self.weights).sum(dim=1, keepdim=True)


class FMInteraction(nn.Module):
    """DeepFM's FM component: bias + first-order terms + pairwise factor interactions (Rendle's O(kn) form).

    Each sparse field's table row holds ``[w, v_1..v_k, padding]``: the first-order weight, then its k factors.
    Returns the FM logit ``[B, 1]`` and the field factors ``[B, fields, k]`` that the deep part reads.
    """

    def __init__(self, table_names: list[str], factors: int) -> None:
        super().__init__()
        self.table_names = list(table_names)
        self.k = factors
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(
        self, dense_fields: torch.Tensor, dense_linear: torch.Tensor, embs: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.stack([embs[n] for n in self.table_names], dim=1).to(dense_fields.dtype)  # [B, T, dim]
        first = rows[..., 0].sum(dim=1, keepdim=True) + dense_linear + self.bias
        fields = torch.cat([dense_fields, rows[..., 1 : 1 + self.k]], dim=1)  # [B, F, k]
        square_of_sum = fields.sum(dim=1).pow(2)
        sum_of_square = fields.pow(2).sum(dim=1)
        second = 0.5 * (square_of_sum - sum_of_square).sum(dim=1, keepdim=True)
        return first + second, fields


class SumHead(nn.Module):
    """DeepFM's output: the deep MLP over the flattened field factors, added to the FM logit."""

    def __init__(self, widths: list[int]) -> None:
        super().__init__()
        self.mlp = MLP(widths)

    def forward(self, fm_logit: torch.Tensor, fields: torch.Tensor) -> torch.Tensor:
        return self.mlp(fields.flatten(1)) + fm_logit


class Tower(nn.Module):
    """One tower of a two-tower model: an MLP over the concatenated embeddings of its side's features."""

    def __init__(self, table_names: list[str], widths: list[int]) -> None:
        super().__init__()
        self.table_names = list(table_names)
        self.mlp = MLP(widths)

    def forward(self, embs: dict[str, torch.Tensor]) -> torch.Tensor:
        dt = self.mlp.layers[0].weight.dtype
        return self.mlp(torch.cat([embs[n].to(dt) for n in self.table_names], dim=1))


class InBatchDotProduct(nn.Module):
    """Retrieval scoring with in-batch candidates: ``scores[i, j] = <query_i, candidate_j>`` ([B, B])."""

    def forward(self, query: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return query @ candidates.to(query.dtype).t()


def _key_padding(lengths: torch.Tensor, length: int, lead: int = 0) -> torch.Tensor:
    """[B, lead + length] True where a position holds a token (``lead`` always-valid positions first)."""
    pos = torch.arange(length, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)
    if lead:
        pos = torch.cat([pos.new_ones((lengths.numel(), lead)), pos], dim=1)
    return pos


class TransformerBlock(nn.Module):
    """A post-norm transformer encoder block (multi-head self-attention + FFN, each residual + LayerNorm).

    Written with explicit matmuls, softmax and LayerNorm (not nn.MultiheadAttention's fused kernel), so that
    every op is one the cost model counts; padded keys are masked out.
    """

    def __init__(self, dim: int, heads: int, ffn_dim: int) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not a multiple of heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.ffn = MLP([dim, ffn_dim, dim])
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).view(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)  # each [B, H, N, d/h]
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d // h))
        scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
        att = torch.softmax(scores, dim=-1) @ v  # [B, H, N, d/h]
        x = self.norm1(x + self.proj(att.transpose(1, 2).reshape(b, n, d)))
        return self.norm2(x + self.ffn(x))


class BehaviourTransformer(nn.Module):
    """BST: [target item; behaviours] + learned position embeddings through transformer blocks.

    Returns the target position's output concatenated with the masked mean of the behaviour positions' outputs.
    """

    def __init__(self, dim: int, max_length: int, blocks: int, heads: int, ffn_dim: int) -> None:
        super().__init__()
        self.position = nn.Parameter(torch.empty(max_length + 1, dim).uniform_(-0.05, 0.05))
        self.blocks = nn.ModuleList([TransformerBlock(dim, heads, ffn_dim) for _ in range(blocks)])

    def forward(self, target: torch.Tensor, behaviours: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        dt = self.position.dtype
        x = torch.cat([target.to(dt).unsqueeze(1), behaviours.to(dt)], dim=1)
        x = x + self.position[: x.shape[1]]
        valid = _key_padding(lengths, behaviours.shape[1], lead=1)
        for block in self.blocks:
            x = block(x, valid)
        w = valid[:, 1:].to(dt).unsqueeze(-1)
        pooled = (x[:, 1:] * w).sum(dim=1) / w.sum(dim=1).clamp_min(1.0)
        return torch.cat([x[:, 0], pooled], dim=1)


class HSTULayer(nn.Module):
    """One HSTU layer (Zhai et al., 2024): pointwise-aggregated (SiLU, not softmax) causal attention.

    ``U, V, Q, K = split(SiLU(f1(X)))``; ``A = SiLU(Q K^T) / n`` under a causal, padding-aware mask;
    ``Y = f2(LayerNorm(A V) * U) + X``. No relative attention bias (see docs/zoo.md).
    """

    def __init__(self, dim: int, heads: int, linear_dim: int, attention_dim: int) -> None:
        super().__init__()
        self.heads, self.linear_dim, self.attention_dim = heads, linear_dim, attention_dim
        self.uvqk = nn.Linear(dim, heads * (2 * linear_dim + 2 * attention_dim))
        self.norm = nn.LayerNorm(heads * linear_dim)
        self.out = nn.Linear(heads * linear_dim, dim)
        self.input_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        h, dl, da = self.heads, self.linear_dim, self.attention_dim
        uvqk = F.silu(self.uvqk(self.input_norm(x)))
        u, v, q, k = torch.split(uvqk, [h * dl, h * dl, h * da, h * da], dim=-1)
        v = v.view(b, n, h, dl).transpose(1, 2)
        q = q.view(b, n, h, da).transpose(1, 2)
        k = k.view(b, n, h, da).transpose(1, 2)
        a = F.silu(q @ k.transpose(-1, -2)) * mask / counts  # [B, H, N, N]
        av = (a @ v).transpose(1, 2).reshape(b, n, h * dl)
        return self.out(self.norm(av) * u) + x


class HSTUAttentionStack(nn.Module):
    """HSTU's encoder: item embeddings + learned positions through stacked HSTU layers; the last valid state."""

    def __init__(self, dim: int, max_length: int, blocks: int, heads: int, linear_dim: int, attention_dim: int) -> None:
        super().__init__()
        self.position = nn.Parameter(torch.empty(max_length, dim).uniform_(-0.05, 0.05))
        self.layers = nn.ModuleList([HSTULayer(dim, heads, linear_dim, attention_dim) for _ in range(blocks)])
        self.final_norm = nn.LayerNorm(dim)

    def forward(self, items: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        dt = self.position.dtype
        b, n, _ = items.shape
        x = items.to(dt) + self.position[:n]
        valid = _key_padding(lengths, n)
        causal = torch.ones((n, n), dtype=torch.bool, device=x.device).tril()
        mask = (causal.unsqueeze(0) & valid.unsqueeze(1)).to(dt).unsqueeze(1)  # [B, 1, N, N]
        counts = lengths.clamp_min(1).to(dt).view(b, 1, 1, 1)  # 1/n: normalise by the user's history length
        for layer in self.layers:
            x = layer(x, mask, counts)
        last = (lengths.long() - 1).clamp_min(0)
        return self.final_norm(x[torch.arange(b, device=x.device), last])
