"""Models as users write them (issue 28, item 2): how a batch is passed, its batch size, the training loss,
and factories imported from the current directory. Real PyTorch models; the CLI as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

import recstack
from recstack.errors import ConfigError, UserCodeError

REPO = Path(__file__).resolve().parents[1]
TINY = dict(iters=2, warmup=2, op_iters=1, cost_model=False, counters=False, machine="none")


class TupleNet(nn.Module):
    """``forward(inputs)`` takes one tuple, as many library models do."""

    def __init__(self, out: int = 1, head: str = "linear") -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.mlp = nn.Linear(12, out)
        self.head = head

    def forward(self, inputs):
        dense, ids = inputs
        y = self.mlp(torch.cat([dense, self.emb(ids)], 1))
        if self.head == "sigmoid":
            return torch.sigmoid(y).squeeze(1)
        if self.head == "squash":  # in [0, 1], made by no sigmoid or softmax
            return y.abs() / (1 + y.abs())
        if self.head == "tuple":
            return y, dense
        if self.head == "own-loss":  # a model that returns its own loss
            return y.pow(2).mean()
        return y


class TwoArgNet(TupleNet):
    """The same model with ``forward(dense, ids)``: tuple batches are its arguments."""

    def forward(self, dense, ids):
        return super().forward((dense, ids))


def _pair(i: int, n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(i)
    return torch.randn(n, 4, generator=g), torch.randint(0, 50, (n,), generator=g)


# -- how the batch is passed -------------------------------------------------------------------------------
def test_one_tuple_forward_says_to_use_call_and_call_runs_it():
    with pytest.raises(UserCodeError) as e:
        recstack.profile(TupleNet(), _pair, **TINY)
    msg = str(e.value)
    assert "\n" not in msg and "TupleNet.forward(inputs) cannot take this batch" in msg
    assert "a tuple batch is passed as 2 positional arguments" in msg and "recstack.Call((inputs,))" in msg
    prof = recstack.profile(TupleNet(), lambda i: recstack.Call((_pair(i),)), **TINY)
    assert prof.run["batch_size"] == 8 and prof.root.extra["throughput_samples_per_s"] > 0
    kw = recstack.profile(TupleNet(), lambda i: recstack.Call(kwargs={"inputs": _pair(i)}), **TINY)
    assert kw.run["batch_size"] == 8


class LibBatch(dict):
    """A library's batch class: a dict with ``.to()`` (passed as it is, not as keyword arguments)."""

    def to(self, device):
        return LibBatch({k: v.to(device) for k, v in self.items()})


class LibBatchNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.mlp = nn.Linear(12, 1)

    def forward(self, batch):
        return self.mlp(torch.cat([batch["dense"], self.emb(batch["ids"])], 1))


def test_a_library_batch_class_is_passed_as_it_is():
    def batch(i: int) -> LibBatch:
        dense, ids = _pair(i, 6)
        return LibBatch(dense=dense, ids=ids)

    prof = recstack.profile(LibBatchNet(), batch, **TINY)  # the old code passed it as keyword arguments
    assert prof.run["batch_size"] == 6  # its dict interface gives the first tensor


class Opaque:
    """A batch class with neither tensors in a container nor a batch_size: nothing tells its size."""

    def __init__(self, i: int) -> None:
        self.dense, self.ids = _pair(i, 5)

    def to(self, device):
        return self


class OpaqueNet(LibBatchNet):
    def forward(self, batch):
        return self.mlp(torch.cat([batch.dense, self.emb(batch.ids)], 1))


def test_unknown_batch_size_warns_and_the_profile_keeps_the_warning():
    with pytest.warns(UserWarning, match="cannot tell the batch size of a Opaque batch") as w:
        prof = recstack.profile(OpaqueNet(), Opaque, **TINY)
    assert prof.run["batch_size"] is None and prof.root.extra["throughput_samples_per_s"] is None
    assert prof.run["warnings"] == [str(w[0].message)] and "batch_size=" in prof.run["warnings"][0]
    given = recstack.profile(OpaqueNet(), Opaque, batch_size=5, **TINY)
    assert given.run["batch_size"] == 5 and not given.run.get("warnings")
    via_call = recstack.profile(OpaqueNet(), lambda i: recstack.Call((Opaque(i),), batch_size=5), **TINY)
    assert via_call.run["batch_size"] == 5 and not via_call.run.get("warnings")


def test_one_batch_size_reading():
    from recstack.calls import infer_batch_size

    dense, ids = _pair(0, 3)
    assert infer_batch_size((dense, ids)) == 3 and infer_batch_size({"x": ids}) == 3
    assert infer_batch_size(recstack.Call((), {"x": dense})) == 3
    assert infer_batch_size(recstack.Batch((dense, ids), torch.ones(3))) == 3
    assert infer_batch_size(recstack.Batch(Opaque(0), None, batch_size=7)) == 7
    assert infer_batch_size(Opaque(0)) is None and infer_batch_size(torch.tensor(1.0)) is None
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        recstack.Call((dense,), batch_size=0)
    moved = recstack.Batch(recstack.Call(((dense, ids),), {"w": dense}, batch_size=3), ids).to("meta")  # --device
    assert moved.inputs.args[0][1].is_meta and moved.inputs.kwargs["w"].is_meta and moved.labels.is_meta
    assert moved.inputs.batch_size == 3


# -- the training loss -------------------------------------------------------------------------------------
def _train(model: nn.Module, batch_fn, **kw):
    return recstack.profile(model, batch_fn, mode="train", **TINY, **kw)


@pytest.mark.parametrize(("head", "out", "shown"), [
    ("linear", 16, "a torch.float32 tensor of shape [8, 16], not a score"),  # a hidden state
    ("tuple", 1, "a tuple of 2, not a score"),
])
def test_training_without_a_loss_on_what_is_not_a_clear_score_is_an_error(head, out, shown):
    with pytest.raises(ConfigError) as e:  # the old code ran BCE-with-logits against random labels
        _train(TwoArgNet(out, head), _pair)
    msg = str(e.value)
    assert msg.startswith("loss_fn: training needs a loss") and shown in msg and "recstack.Batch" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(("head", "function"), [
    ("linear", "binary_cross_entropy_with_logits"),
    ("sigmoid", "binary_cross_entropy"),  # probabilities: BCE-with-logits would squash them a second time
    ("squash", "binary_cross_entropy_with_logits"),  # in [0, 1], but no sigmoid or softmax: the graph decides
    ("own-loss", "output"),  # a 0-dim output is the loss
])
def test_training_picks_its_loss_from_what_the_output_is_and_records_it(head, function):
    prof = _train(TwoArgNet(1, head), _pair)
    assert prof.run["loss"]["function"] == function
    assert prof.run["loss"]["labels"] == (None if function == "output" else "seeded_random")
    assert {"loss", "backward", "optimizer"} <= {c.name for c in prof.root.children}


def test_labels_travel_with_the_batch():
    labels = torch.randint(0, 3, (8,))
    seen = []

    def batch(i: int) -> recstack.Batch:
        return recstack.Batch(recstack.Call((_pair(i),)), labels)

    prof = _train(TupleNet(3), batch)  # class labels [B] against [B, 3]: cross-entropy on the batch's labels
    assert prof.run["loss"] == {"function": "cross_entropy", "labels": "batch", "why": prof.run["loss"]["why"]}
    binary = _train(TupleNet(1, "sigmoid"), lambda i: recstack.Batch(recstack.Call((_pair(i),)), torch.ones(8)))
    assert binary.run["loss"]["function"] == "binary_cross_entropy" and binary.run["loss"]["labels"] == "batch"

    def my_loss(out, b):
        seen.append(b.labels)
        return nn.functional.mse_loss(out.squeeze(1), b.labels.float())

    given = _train(TupleNet(1), batch, loss_fn=my_loss)
    assert given.run["loss"]["function"] == "loss_fn" and given.run["loss"]["name"].endswith("my_loss")
    assert seen and all(s is labels for s in seen)
    with pytest.raises(ConfigError, match=r"labels \(shape \[5\]\) do not match"):
        _train(TupleNet(1), lambda i: recstack.Batch(recstack.Call((_pair(i),)), torch.ones(5)))


# -- the CLI -----------------------------------------------------------------------------------------------
USERMOD = '''
import torch
from torch import nn


class TupleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.mlp = nn.Linear(12, 1)

    def forward(self, inputs):
        dense, ids = inputs
        return self.mlp(torch.cat([dense, self.emb(ids)], 1))


def _pair(batch_size, i):
    g = torch.Generator().manual_seed(i)
    return torch.randn(batch_size, 4, generator=g), torch.randint(0, 50, (batch_size,), generator=g)


def tuple_batches(batch_size, seed):
    return TupleNet(), lambda i: _pair(batch_size, i)
'''


def _recstack_script(tmp: Path) -> list[str]:
    """The installed ``recstack`` script (its sys.path[0] is its bin folder, not the current directory), or
    a copy of what pip writes there when it is not installed next to this interpreter."""
    script = Path(sys.executable).parent / "recstack"
    if not script.exists():
        script = tmp / "bin" / "recstack"
        script.parent.mkdir()
        script.write_text("import sys\nfrom recstack.cli import main\nsys.exit(main())\n")
    return [sys.executable, str(script)]


def _cli(tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))  # recstack's sources only: not the user's folder
    return subprocess.run([*_recstack_script(tmp), *argv], cwd=tmp / "work", env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("usermodels")
    (tmp / "work").mkdir()
    (tmp / "work" / "tuplenet.py").write_text(textwrap.dedent(USERMOD))
    return tmp


def test_cli_imports_from_the_current_directory_and_says_how_to_pass_one_tuple(work):
    r = _cli(work, "profile", "tuplenet:tuple_batches", "--batch-size", "8", "--iters", "2", "--warmup", "2",
             "--machine", "none")
    # the old code: "cannot import 'tuplenet'" (the script's sys.path has its bin folder, not the current
    # directory); with PYTHONPATH set, a bare TypeError as an internal error, exit 70
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: your model's TupleNet.forward(inputs) cannot take"), r.stderr
    assert "a tuple batch is passed as 2 positional arguments" in lines[0] and "recstack.Call" in lines[0]
