"""RunConfig, the generated CLI, the API's argument errors, user-code errors, exit codes, early output checks.

Real runs on tiny models; the CLI in-process through ``main(argv)`` except where
a fresh process is the point (lazy imports, signals).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import recstack
from recstack.cli import main
from recstack.commands import build_profile_parser, flag_of, run_config_from_args
from recstack.config.run import RunConfig, usable_cores
from recstack.errors import ConfigError, ContendedRunError, UserCodeError
from recstack.profiling.environment import strict_check
from recstack.profiling.runner import ProfileOptions

REPO = Path(__file__).resolve().parents[1]
# recstack's own source folder as a traceback names it, plain and resolved: the checkout's folder may itself be
# called "recstack" (git clone ... recstack), so a bare "recstack/" says nothing about whose frame a line is.
RECSTACK_SRC = tuple({str(Path(recstack.__file__).parent) + os.sep, str(Path(recstack.__file__).resolve().parent) + os.sep})


def has_recstack_frame(text: str) -> bool:
    return any(f'File "{src}' in text for src in RECSTACK_SRC)
SRC = REPO / "src"
TINY = dict(iters=2, warmup=1, op_iters=1, num_batches=1, cost_model=False, counters=False)

USER_MODULE = '''
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self, fail_at=None):
        super().__init__()
        self.embedding = nn.EmbeddingBag(50, 4, mode="sum")
        self.top_mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.calls = 0
        self.fail_at = fail_at

    def forward(self, ids, offsets):
        self.calls += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise ValueError("tiny broke on call %d" % self.calls)
        return self.top_mlp(self.embedding(ids, offsets))


class NoParams(nn.Module):
    def forward(self, x):
        return x * 2


def _batches(batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    def batch():
        return (torch.randint(0, 50, (batch_size * 3,), generator=g), torch.arange(0, batch_size * 3, 3))
    return batch


def good(batch_size, seed):
    return Tiny(), _batches(batch_size, seed)


def raises(batch_size, seed):
    raise RuntimeError("factory cannot build")


def forty_two(batch_size, seed):
    return 42


def three(batch_size, seed):
    return Tiny(), _batches(batch_size, seed), None


def none_batch(batch_size, seed):
    return Tiny(), lambda: None


def generator_batch(batch_size, seed):
    def gen():
        yield 1
    return Tiny(), gen


def dies_mid_run(batch_size, seed):
    return Tiny(fail_at=3), _batches(batch_size, seed)


def float_ids(batch_size, seed):
    return Tiny(), lambda: (torch.rand(batch_size * 3, dtype=torch.float64), torch.arange(0, batch_size * 3, 3))


def bad_index_later(batch_size, seed):
    # Batch 0 is fine; from batch 1 on an index lies past the table, so torch first raises in the
    # step that records the call order, below recstack's forward wrapper of the embedding module.
    def batch(i):
        ids = torch.zeros(batch_size * 3, dtype=torch.long)
        if i >= 1:
            ids[0] = 10_000
        return ids, torch.arange(0, batch_size * 3, 3)
    return Tiny(), batch


def no_params(batch_size, seed):
    return NoParams(), lambda: torch.ones(batch_size, 4)


def meta_model(batch_size, seed):
    with torch.device("meta"):
        model = Tiny()
    return model, _batches(batch_size, seed)


def takes_outputs(batch_size, seed):
    import os
    os.mkdir("p.json")  # something else takes the output paths after the early check
    os.mkdir("t.json")
    return good(batch_size, seed)


def sleeps(batch_size, seed):
    import pathlib, time
    pathlib.Path("started").write_text("1")
    time.sleep(60)
'''


@pytest.fixture()
def usermod(tmp_path, monkeypatch):
    """A user's module of factories on sys.path (module name unique per test)."""
    name = f"usermodels_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return name


def _run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _subprocess(code: str, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + str(cwd or ""))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=cwd, **kw)


# -- RunConfig ------------------------------------------------------------------------
def test_ranges_and_strict_types_name_the_field():
    cases = [
        ({"batch_size": "16"}, "batch_size"),
        ({"batch_size": -1}, "batch_size"),
        ({"batch_size": 2**24 + 1}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"iters": 1}, "iters"),
        ({"seed": -5}, "seed"),
        ({"seed": 99999999999999999999999}, "seed"),
        ({"scale": 1e12}, "scale"),
        ({"scale": float("nan")}, "scale"),
        ({"mode": "serve"}, "mode"),
        ({"batchsize": 3}, "batchsize"),
    ]
    for bad, field in cases:
        with pytest.raises(ConfigError) as e:
            RunConfig.build(None, bad)
        assert e.value.field == field, bad
        assert "\n" not in str(e.value)
    assert RunConfig(scale=1, batch_size=2**24).scale == 1.0  # an int is a fine float


def test_threads_clamped_to_usable_cores_with_warning():
    with pytest.warns(UserWarning, match=rf"1000 requested but only {usable_cores()} cores"):
        cfg = RunConfig(threads=1000)
    assert cfg.threads == usable_cores()


def test_key_hashes_file_contents_not_paths(tmp_path):
    spec = (REPO / "src/recstack/workload/presets/production.yaml").read_text()
    a, b = tmp_path / "a" / "w.yaml", tmp_path / "b.yaml"
    a.parent.mkdir()
    a.write_text(spec)
    b.write_text(spec)
    ka, kb = RunConfig(model="rmc1", workload=str(a)).key(), RunConfig(model="rmc1", workload=str(b)).key()
    assert ka == kb and len(ka) == 64
    b.write_text(spec + "\n# changed\n")
    assert RunConfig(model="rmc1", workload=str(b)).key() != ka
    assert RunConfig(model="rmc1", workload="production").key() != RunConfig(model="rmc1").key()
    assert RunConfig(model="rmc1", iters=3).key() == RunConfig(model="rmc1", iters=3).key()
    assert RunConfig(model="rmc1", iters=3).key() != RunConfig(model="rmc1", iters=4).key()


def test_every_field_has_a_generated_flag_and_errors_name_it(capsys):
    parser = build_profile_parser()
    flags = {s for a in parser._actions for s in a.option_strings}
    for name in RunConfig.model_fields:
        if name != "model":
            assert flag_of(name) in flags
    choices = {a.dest: a.choices for a in parser._actions if a.choices}
    assert choices["mode"] == ["inference", "train"] and choices["backend"] == ["torch", "torchrec", "tbe"]
    rc, _, err = _run(["profile", "rmc1", "--batch-size", "0"], capsys)
    assert rc == 2 and err.startswith("error: --batch-size: must be within 1..16777216") and err.count("\n") == 1


def test_seed_rule_is_one_for_profile_and_workload_stats(capsys):
    _, _, e1 = _run(["profile", "rmc1", "--seed", "-5"], capsys)
    _, _, e2 = _run(["workload", "stats", "--preset", "uniform", "--batch-size", "8", "--seed", "-5"], capsys)
    assert e1 == e2 == "error: --seed: must be within 0..9223372036854775807 (got -5)\n"


def test_yaml_config_and_flags_override(tmp_path):
    (tmp_path / "spec.yaml").write_text((REPO / "src/recstack/workload/presets/uniform.yaml").read_text())
    run = tmp_path / "run.yaml"
    run.write_text("model: rmc2\nbatch_size: 256\niters: 7\nworkload: spec.yaml\n")
    args = build_profile_parser().parse_args(["--config", str(run), "--iters", "3"])
    cfg = run_config_from_args(args)
    assert (cfg.model, cfg.batch_size, cfg.iters, cfg.machine) == ("rmc2", 256, 3, "auto")
    assert cfg.workload == str(tmp_path / "spec.yaml")  # relative to the YAML's folder
    run.write_text("model: rmc2\nbatch_size: '256'\n")
    with pytest.raises(ConfigError, match=r"run.yaml: batch_size: Input should be a valid integer"):
        run_config_from_args(build_profile_parser().parse_args(["--config", str(run)]))


def test_profile_options_forward_config_fields():
    opts = ProfileOptions(mode="train", iters=4)
    assert (opts.mode, opts.iters, opts.warmup, opts.config.mode) == ("train", 4, 5, "train")
    with pytest.raises(ConfigError):
        ProfileOptions(iters=1)
    with pytest.raises(AttributeError):
        _ = opts.no_such_option


# -- the API ------------------------------------------------------------------------------
def test_api_bad_arguments_raise_config_error_naming_the_field():
    cases = [
        (lambda: recstack.profile_zoo("rmc1", batch_size="16"), "batch_size"),
        (lambda: recstack.profile_zoo("rmc1", batch_size=-4), "batch_size"),
        (lambda: recstack.profile_zoo("rmc1", bogus=1), "bogus"),
        (lambda: recstack.profile_zoo("rmc1", config="rmc1"), "config"),
        (lambda: recstack.profile_zoo(nn.Linear(2, 2)), "model"),
        (lambda: recstack.profile_zoo(), "model"),
        (lambda: recstack.profile("x", [torch.ones(2)]), "model"),
        (lambda: recstack.profile(nn.Linear(2, 1), 42), "inputs"),
        (lambda: recstack.profile(nn.Linear(2, 1), [], iters=2), "inputs"),
        (lambda: recstack.profile(nn.Linear(2, 1), [torch.ones(2, 2)], num_batches=0), "num_batches"),
        (lambda: recstack.profile(nn.Linear(2, 1), [torch.ones(2, 2)], counters="yes"), "counters"),
    ]
    for call, field in cases:
        with pytest.raises(recstack.ConfigError) as e:
            call()
        assert e.value.field == field


def test_api_config_and_overrides_land_in_run_config():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    cfg = RunConfig(iters=3, seed=7)
    prof = recstack.profile(model, [torch.ones(6, 4)], cfg, warmup=0, op_iters=1, cost_model=False, counters=False)
    run = prof.run["config"]
    assert (run["iters"], run["warmup"], run["seed"], run["batch_size"]) == (3, 0, 7, 6)  # batch size read
    assert prof.run["batch_size"] == 6 and len(prof.run["config_key"]) == 64
    assert RunConfig.build(run).key() == prof.run["config_key"]


def test_api_user_errors():
    with torch.device("meta"):
        meta = nn.Linear(4, 1)
    with pytest.raises(ConfigError, match="meta device") as e:
        recstack.profile(meta, [torch.ones(2, 4)], **TINY)
    assert e.value.field == "model"
    with pytest.raises(ConfigError, match="meta device"):
        recstack.profile(nn.Linear(4, 1), [torch.ones(2, 4, device="meta")], **TINY)

    class Frozen(nn.Module):
        def forward(self, x):
            return x.sum(1, keepdim=True)

    with pytest.raises(ConfigError, match="no trainable parameters") as e:
        recstack.profile(Frozen(), [torch.ones(2, 4)], mode="train", **TINY)
    assert e.value.field == "mode"

    def my_batches(i):
        return None

    with pytest.raises(UserCodeError, match="my_batches returned None"):
        recstack.profile(nn.Linear(4, 1), my_batches, **TINY)

    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, x):
            return self.lin(x.double())  # dtype mismatch inside torch, called from the user's forward

    with pytest.raises(UserCodeError, match=r"Broken\.forward") as e:
        recstack.profile(Broken(), [torch.ones(2, 4)], **TINY)
    assert "test_cli_config.py" in e.value.user_frames and not has_recstack_frame(e.value.user_frames)


# -- user code through the CLI ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("factory", "expect"),
    [
        ("raises", "raised RuntimeError: factory cannot build, in raises"),
        ("forty_two", "must return (model, batch_fn); it returned int 42"),
        ("three", "it returned a 3-tuple"),
        ("none_batch", "returned None"),
        ("generator_batch", "returned a generator"),
        ("dies_mid_run", "raised ValueError: tiny broke on call 3, in Tiny.forward"),
        ("float_ids", "raised RuntimeError"),
        ("bad_index_later", "not in the valid range [0, 50), in Tiny.forward"),
        ("no_params", "no trainable parameters"),
        ("meta_model", "meta device"),
    ],
)
def test_cli_user_code_errors(usermod, capsys, factory, expect):
    mode = ["--mode", "train"] if factory == "no_params" else []
    rc, _, err = _run(["profile", f"{usermod}:{factory}", "--batch-size", "4", "--iters", "2", "--warmup", "3",
                       "--machine", "none", *mode], capsys)
    assert rc == 2, err
    first, *rest = err.splitlines()
    assert first.startswith("error: ") and expect in first, err
    assert "Traceback" not in err and not has_recstack_frame(err)  # only the user's frames
    if factory == "no_params":
        assert first.startswith("error: --mode: NoParams has no trainable parameters")
    if factory in ("raises", "dies_mid_run"):
        assert f"{usermod}.py" in err


def test_cli_factory_run_with_config_yaml_trace_and_fallbacks(usermod, tmp_path, capsys):
    (tmp_path / "run.yaml").write_text(f"model: {usermod}:good\nbatch_size: 4\niters: 2\nwarmup: 0\nop_iters: 1\n")
    out, trace = tmp_path / "o" / "p.json", tmp_path / "t" / "trace.json"
    rc, stdout, err = _run(["profile", "--config", "run.yaml", "--machine", "none", "-o", str(out),
                            "--trace", str(trace), "--depth", "1"], capsys)
    assert rc == 0, err
    assert f"profile written to {out}" in stdout and f"trace written to {trace}" in stdout
    prof = recstack.Profile.load(out)
    assert prof.run["config"]["model"] == f"{usermod}:good" and prof.run["trace"] == str(trace)
    assert json.loads(trace.read_text())["traceEvents"]
    assert not list(out.parent.glob(".recstack-tmp-*"))


def test_outputs_that_fail_at_the_end_fall_back(usermod, tmp_path, capsys):
    rc, stdout, err = _run(["profile", f"{usermod}:takes_outputs", "--batch-size", "4", "--iters", "2",
                            "--warmup", "0", "--op-iters", "1", "--machine", "none", "-o", "p.json",
                            "--trace", "t.json", "--depth", "1"], capsys)
    assert rc == 0, err
    assert "embedding" in stdout  # the tree is printed regardless
    line = next(ln for ln in stdout.splitlines() if ln.startswith("cannot write p.json"))
    fallback = Path(line.rsplit("profile written to ", 1)[1].removesuffix(" instead"))
    assert recstack.Profile.load(fallback).run["config"]["model"] == f"{usermod}:takes_outputs"
    assert err.startswith("warning: trace: cannot write t.json")
    trace = Path(next(ln for ln in stdout.splitlines() if ln.startswith("trace written to")).split()[3])
    assert trace != Path("t.json") and json.loads(trace.read_text())["traceEvents"]
    fallback.unlink()
    trace.unlink()


@pytest.mark.parametrize(
    "argv",
    [
        ["profile", "rmc1", "-o", "/proc/version"],
        ["profile", "rmc1", "-o", "."],
        ["profile", "rmc1", "--trace", "README.md/x.json"],
        ["report", "p.json", "-o", "/proc/x.html"],
        ["diff", "a.json", "b.json", "-o", "/proc/d.html"],
        ["export", "p.json", "-o", "/proc/p.csv"],
        ["roofline", "p.json", "-o", "/proc/r.png"],
        ["workload", "fit", "x.csv", "-o", "/proc/w.yaml"],
        ["demo", "--out", "README.md"],
    ],
)
def test_outputs_checked_before_any_work(argv, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    rc, _, err = _run(argv, capsys)
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "--out" in err or "--output" in err or "--trace" in err


def test_demo_bad_model_leaves_no_folder(tmp_path, capsys):
    rc, _, err = _run(["demo", "--model", "nosuch", "--out", str(tmp_path / "demo")], capsys)
    assert rc == 2 and "nosuch" in err
    assert not (tmp_path / "demo").exists()


def test_strict_raises_only_for_a_contended_run(tmp_path):
    model = nn.Linear(4, 1)
    prof = recstack.profile(model, [torch.ones(2, 4)], **TINY)
    prof.environment["contention"] = {"detected": False, "evidence": []}
    strict_check(prof, tmp_path / "p.json")
    prof.environment["contention"] = {"detected": True, "evidence": ["load average 3.0 on 2 cores"]}
    with pytest.raises(ContendedRunError, match="load average 3.0") as e:
        strict_check(prof, tmp_path / "p.json")
    assert e.value.exit_code == 3 and "p.json" in str(e.value)


# -- main: exit codes, --debug ------------------------------------------------------------------
def test_debug_before_or_after_the_command(tmp_path, capsys):
    for argv in (["--debug", "show", str(tmp_path / "no.json")], ["show", str(tmp_path / "no.json"), "--debug"]):
        rc, _, err = _run(argv, capsys)
        assert rc == 2 and err.startswith("error: ") and "Traceback" in err
    rc, _, err = _run(["show", str(tmp_path / "no.json")], capsys)
    assert rc == 2 and "Traceback" not in err


def test_unexpected_exception_is_an_internal_error(capsys, monkeypatch):
    import recstack.commands

    def cmd_show(args):
        return {}["a bug"]

    monkeypatch.setattr(recstack.commands, "cmd_show", cmd_show)
    rc, _, err = _run(["show", "x.json"], capsys)
    assert rc == 70 and err.startswith("internal error: KeyError") and "please report" in err and "--debug" in err


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_signals_exit_cleanly(usermod, tmp_path, sig, code, word):
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{tmp_path}")
    # SIGINT at its default in the child: a test run started in the background (`cmd &` in a script) inherits
    # SIGINT ignored, and Python then keeps it ignored, which is not what this test is about.
    p = subprocess.Popen([sys.executable, "-m", "recstack", "profile", f"{usermod}:sleeps", "-o", "p.json"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code and err.strip().endswith(word), err
    assert not (tmp_path / "p.json").exists() and "Traceback" not in err


# -- lazy torch, README ---------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--help"], ["zoo", "list", "--json"], ["profile", "rmc1", "-o", "/proc/version"]])
def test_light_commands_do_not_import_torch(argv):
    code = textwrap.dedent(f"""
        import sys
        from recstack.cli import main
        try:
            rc = main({argv!r})
        except SystemExit as e:
            rc = e.code
        print("RC", rc, "torch" in sys.modules)
    """)
    r = _subprocess(code)
    assert r.stdout.strip().splitlines()[-1] in ("RC 0 False", "RC 2 False"), r.stdout + r.stderr


def test_zoo_list_figures_match_the_models():
    from recstack.zoo.build import summary
    from recstack.zoo.catalog import list_rows

    for scale in (1.0, 0.01):
        assert list_rows(scale) == [summary(n, scale) for n in recstack.zoo.builtin_names()]


def test_readme_synopsis_and_exit_codes_are_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts/gen_synopsis.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
