"""Recurrent layers and cells: costs from the gate matrix multiplies plus the gate arithmetic.

For every layer and direction, and every (time step, sample) row:

* gate projections ``x @ W_ih.T`` and ``h @ W_hh.T``: ``2 * G*H * (I + H)``
  FLOPs, with G gates (GRU 3, LSTM 4, tanh/ReLU RNN 1) of hidden size H and
  input size I (later layers: H times the number of directions); these are
  also ``extra['matmul_flops']``;
* biases ``b_ih``/``b_hh``: ``G*H`` each;
* gate arithmetic per hidden unit: GRU 17 (r, z: add + sigmoid(4) each;
  n: multiply, add, tanh; h' = (1-z)*n + z*h: 4), LSTM 22 (i, f, o: add +
  sigmoid; g: add + tanh; c' = f*c + i*g: 3; h' = o*tanh(c'): 2), RNN 2
  (add + activation); an LSTM projection adds ``2*H*P``.

Bytes (compulsory): input, initial states and every parameter read once;
output sequence and final states written once. Gate activations kept for
backward are intermediates and are not counted.
"""

from __future__ import annotations

from recstack.costmodel.meta import Call, TensorMeta, iter_tensors
from recstack.costmodel.registry import Formula, OpCost, make_cost, register

GATES = {"gru": 3, "lstm": 4, "rnn_tanh": 1, "rnn_relu": 1}
CELL_OPS = {"gru": 17, "lstm": 22, "rnn_tanh": 2, "rnn_relu": 2}
MODE_KIND = {0: "rnn_relu", 1: "rnn_tanh", 2: "lstm", 3: "gru"}  # cuDNN / oneDNN mode numbers


def layer_cost(kind: str, rows: int, w_ih: TensorMeta, w_hh: TensorMeta, n_bias: int,
               w_hr: TensorMeta | None = None) -> tuple[float, float]:
    """(total FLOPs, matmul FLOPs) of one layer-direction over ``rows`` (time step, sample) pairs."""
    gh = w_ih.shape[0]  # G * H
    h = gh // GATES[kind]
    in_dim = w_ih.shape[1]
    rec_dim = w_hh.shape[1]
    mm = 2.0 * rows * gh * (in_dim + rec_dim)
    if w_hr is not None:
        mm += 2.0 * rows * w_hr.shape[0] * w_hr.shape[1]
    ops = mm + rows * (n_bias * gh + CELL_OPS[kind] * h)
    return ops, mm


def _groups(params: list[TensorMeta], has_biases: bool, kind: str) -> list[list[TensorMeta]]:
    """Split the flat parameter list into per layer-direction groups (w_ih, w_hh[, b_ih, b_hh][, w_hr])."""
    size = 4 if has_biases else 2
    if kind == "lstm" and len(params) % size:
        size += 1  # projection weight
    if len(params) % size:
        size = 5 if has_biases else 3
    return [params[i : i + size] for i in range(0, len(params), size)]


def _rnn(call: Call, kind: str, packed: bool) -> OpCost | None:
    """``aten::gru`` / ``lstm`` / ``rnn_tanh`` / ``rnn_relu``, ``.input`` and ``.data`` (packed) overloads."""
    x = call.tensor(0, "input") or call.tensor(0, "data")
    if x is None:
        return None
    p = 1 if packed else 0  # .data has batch_sizes after data
    hx = call.arg(1 + p, "hx")
    params = [t for t in iter_tensors(call.arg(2 + p, "params")) if isinstance(t, TensorMeta)]
    has_biases = bool(call.arg(3 + p, "has_biases", True))
    num_layers = int(call.arg(4 + p, "num_layers", 1))
    bidirectional = bool(call.arg(7 + p, "bidirectional", False))
    return _from_groups(kind, x, list(iter_tensors(hx)), _groups(params, has_biases, kind), num_layers,
                        bidirectional, has_biases, [*iter_tensors(call.outputs or ())])


def _from_groups(kind: str, x: TensorMeta, states: list[TensorMeta], groups: list[list[TensorMeta]],
                 num_layers: int, bidirectional: bool, has_biases: bool, outputs: list[TensorMeta]) -> OpCost | None:
    dirs = 2 if bidirectional else 1
    if len(groups) != num_layers * dirs or any(len(g) < 2 for g in groups):
        return None
    in_dim = groups[0][0].shape[1]
    rows = x.numel // max(1, in_dim)
    ops = mm = 0.0
    for g in groups:
        w_hr = g[4] if len(g) == 5 else (g[2] if len(g) == 3 else None)
        o, m = layer_cost(kind, rows, g[0], g[1], 2 if has_biases else 0, w_hr)
        ops += o
        mm += m
    read = x.nbytes + sum(s.nbytes for s in states) + sum(t.nbytes for g in groups for t in g)
    if outputs:
        written = sum(o.nbytes for o in outputs)
    else:
        out_h = groups[-1][1].shape[1]
        written = rows * out_h * dirs * x.itemsize + sum(s.nbytes for s in states)
    cost = make_cost(ops, x.dtype, read, written, kind="rnn")
    if cost.flops:
        cost.extra["matmul_flops"] = mm
    return cost


def _rnn_formula(kind: str) -> Formula:
    def formula(call: Call) -> OpCost | None:
        # .data (packed) puts batch_sizes second: a tensor where .input has hx (LSTM: a list)
        if call.overload:
            packed = call.overload == "data"
        elif kind == "lstm":
            packed = isinstance(call.arg(1), TensorMeta)
        else:
            packed = isinstance(call.arg(2), TensorMeta)
        return _rnn(call, kind, packed)

    return formula


for _kind in GATES:
    register(f"aten::{_kind}")(_rnn_formula(_kind))


def _cell(call: Call, kind: str) -> OpCost | None:
    x = call.tensor(0, "input")
    hx = list(iter_tensors(call.arg(1, "hx")))
    w_ih, w_hh = call.tensor(2, "w_ih"), call.tensor(3, "w_hh")
    b_ih, b_hh = call.tensor(4, "b_ih"), call.tensor(5, "b_hh")
    if x is None or w_ih is None or w_hh is None:
        return None
    rows = x.numel // max(1, w_ih.shape[1])
    n_bias = (b_ih is not None) + (b_hh is not None)
    ops, mm = layer_cost(kind, rows, w_ih, w_hh, n_bias)
    read = x.nbytes + sum(h.nbytes for h in hx) + sum(t.nbytes for t in (w_ih, w_hh, b_ih, b_hh) if t)
    written = sum(h.nbytes for h in hx)  # new h (and c): same shapes as the old ones
    cost = make_cost(ops, x.dtype, read, written, kind="rnn")
    if cost.flops:
        cost.extra["matmul_flops"] = mm
    return cost


def _cell_formula(kind: str) -> Formula:
    def formula(call: Call) -> OpCost | None:
        return _cell(call, kind)

    return formula


for _kind in GATES:
    register(f"aten::{_kind}_cell")(_cell_formula(_kind))


@register("aten::mkldnn_rnn_layer")
def mkldnn_rnn_layer(call: Call) -> OpCost | None:
    """oneDNN's one-layer, one-direction RNN (what ``aten::lstm`` runs on CPU)."""
    x, w_ih, w_hh = call.tensor(0, "input"), call.tensor(1, "weight0"), call.tensor(2, "weight1")
    b_ih, b_hh = call.tensor(3, "weight2"), call.tensor(4, "weight3")
    hx, cx = call.tensor(5, "hx_"), call.tensor(6, "cx_")
    kind = MODE_KIND.get(int(call.arg(9, "mode", 2)))
    has_biases = bool(call.arg(12, "has_biases", True))
    if x is None or w_ih is None or w_hh is None or kind is None:
        return None
    rows = x.numel // max(1, w_ih.shape[1])
    ops, mm = layer_cost(kind, rows, w_ih, w_hh, 2 if has_biases else 0)
    states = [s for s in (hx, cx) if s is not None]
    read = x.nbytes + sum(s.nbytes for s in states) + sum(t.nbytes for t in (w_ih, w_hh, b_ih, b_hh) if t)
    h = w_hh.shape[1]
    written = rows * h * x.itemsize + sum(s.nbytes for s in states)
    cost = make_cost(ops, x.dtype, read, written, kind="rnn")
    if cost.flops:
        cost.extra["matmul_flops"] = mm
    return cost


@register("aten::_cudnn_rnn")
def cudnn_rnn(call: Call) -> OpCost | None:
    """cuDNN's fused multi-layer RNN: the weight list is grouped per layer-direction as for aten::lstm."""
    x = call.tensor(0, "input")
    weights = list(iter_tensors(call.arg(1, "weight")))
    stride0 = int(call.arg(2, "weight_stride0", 4))
    hx, cx = call.tensor(4, "hx"), call.tensor(5, "cx")
    kind = MODE_KIND.get(int(call.arg(6, "mode", 2)))
    num_layers = int(call.arg(9, "num_layers", 1))
    bidirectional = bool(call.arg(13, "bidirectional", False))
    if x is None or kind is None or stride0 < 2:
        return None
    groups = [weights[i : i + stride0] for i in range(0, len(weights), stride0)]
    has_biases = stride0 >= 4
    states = [s for s in (hx, cx) if s is not None]
    return _from_groups(kind, x, states, groups, num_layers, bidirectional, has_biases, [])


@register("aten::_thnn_fused_gru_cell", "aten::_thnn_fused_lstm_cell")
def fused_cell(call: Call) -> OpCost | None:
    """The gate arithmetic of a cell whose projections were computed already (CUDA fused cells)."""
    ig, hg = call.tensor(0, "input_gates"), call.tensor(1, "hidden_gates")
    if ig is None or hg is None:
        return None
    kind = "gru" if "gru" in call.name else "lstm"
    h = ig.shape[-1] // GATES[kind]
    rows = ig.numel // max(1, ig.shape[-1])
    n_bias = (call.tensor(3) is not None) + (call.tensor(4) is not None)
    ops = rows * (CELL_OPS[kind] * h + n_bias * GATES[kind] * h)
    read = sum(t.nbytes for t in call.inputs())
    written = sum(o.nbytes for o in call.outputs) if call.outputs else rows * h * ig.itemsize
    return make_cost(ops, ig.dtype, read, written, kind="rnn")


def rnn_step_flops(kind: str, batch: int, input_dim: int, hidden: int, bias: bool = True) -> float:
    """FLOPs of one step of a one-layer cell: gate projections, biases and gate arithmetic."""
    g = GATES[kind]
    return batch * (2.0 * g * hidden * (input_dim + hidden) + (2 * g * hidden if bias else 0) + CELL_OPS[kind] * hidden)

