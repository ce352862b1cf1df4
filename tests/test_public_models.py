"""Models from public recommendation libraries profile with their stages (structure only; shares go to
benchmarks/bench_public_models.py). Tiny sizes, no downloads: the libraries are installed by `make setup`
(pyproject extra `public-models`); a test skips where its library is absent."""

from __future__ import annotations

import importlib.util

import pytest
from _public_models import MODELS

import recstack
from recstack.profiling.assemble import outermost_ops
from recstack.tree import Profile


def _profile(name: str, mode: str = "inference") -> Profile:
    module, build, _ = MODELS[name]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (make setup installs the public-models extra)")
    model, batch = build()
    return recstack.profile(model, batch, mode=mode, iters=3, warmup=1, op_iters=1, num_batches=2,
                            counters=False, cost_model=False, run_info={"model": name})


@pytest.mark.parametrize("name", sorted(MODELS))
def test_public_model_has_its_stages_and_accounts_for_every_op(name):
    prof = _profile(name)
    want = MODELS[name][2]
    found = {c.name for c in prof.root.children if c.calls and c.time_s > 0}
    assert want <= found, (want - found, prof.run["stage_roots"], prof.run["never_ran_roots"])
    # no never-run root: every stage root has a module node the op pass saw called
    called = {n.name for n in prof.nodes() if n.level == "module" and n.calls >= 1}
    roots = set(prof.run["stage_roots"])
    assert roots <= called, roots - called
    # ops accounted: the op pass's outermost ops all land in the tree
    placed = sum(n.extra["op_pass_time_s"] for n in outermost_ops(prof.root))
    assert placed == pytest.approx(prof.overhead["op_pass_op_time_s"], rel=0.01)
    # embedding ops sit in the embedding stage, not in `other`
    emb_ops = {n.name for n in prof.stage("embedding").walk() if n.level == "op"}
    assert emb_ops & {"aten::embedding", "aten::embedding_bag", "aten::_embedding_bag"}, emb_ops
    other_ops = {c.name for c in prof.stage("other").children}
    assert not other_ops & {"aten::embedding", "aten::embedding_bag"}, other_ops


def test_deepctr_tables_dict_hands_down_to_each_table():
    prof = _profile("deepctr-deepfm")
    never = prof.run["never_ran_roots"]["embedding_dict"]
    assert never["stage"] == "embedding" and len(never["handed_to"]) == 26
    rule = prof.run["stage_roots"]["embedding_dict.C0"]["rule"]
    assert rule == "inherited-from:embedding_dict (container never ran)"
    # the DNN's Linear and ReLU lists are called element by element: siblings 0, 0, 1, 1 get path labels
    dnn = prof.stage("dense").child("dnn")
    labels = sorted(c.extra["label"] for c in dnn.children if c.level == "module")
    assert {"linears.0", "activation_layers.0", "linears.1", "activation_layers.1"} <= set(labels)


def test_rechub_din_attention_units_form_the_sequence_stage():
    prof = _profile("rechub-din")
    assert prof.run["never_ran_roots"]["attention_layers"]["handed_to"] == ["attention_layers.0", "attention_layers.1"]
    seq = prof.stage("sequence")
    assert {c.name for c in seq.children if c.level == "module" and c.extra.get("kind") != "caller"} == {
        "attention_layers.0", "attention_layers.1"}


def test_rechub_din_trains():
    prof = _profile("rechub-din", mode="train")
    assert {"embedding", "sequence", "loss", "backward", "optimizer"} <= {c.name for c in prof.root.children}
    assert "sequence" in {c.name for c in prof.stage("backward").children}
    # its forward ends in torch.sigmoid: probabilities, so BCE on them (the old step squashed them again)
    assert prof.run["loss"]["function"] == "binary_cross_entropy" and prof.run["loss"]["labels"] == "seeded_random"
