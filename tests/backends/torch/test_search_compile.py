"""``torch.compile`` of the search (full RRNN) and of the RRNN-GRU step: a
failure (at ``torch.compile`` or at the first compiled call) warns once and gives exactly the
eager results; compiled and eager agree."""

from __future__ import annotations

import warnings

import pytest
import torch

from cellgraph.backends.torch.algorithm2 import scoring
from cellgraph.backends.torch.algorithm2 import search as search_module
from cellgraph.backends.torch.runtime.compiled import Compiled
from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU
from cellgraph.backends.torch.training.task import _core
from cellgraph.benchmarks.compile_bench import compare_compile
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import resolve_config


def _run(mode: str, compile: bool, dtype=torch.float64, model: RRNN | None = None, sync_free: bool | None = None):
    """Output, scores, chosen tuples and all gradients of a tiny RRNN (fixed seed), or of
    ``model``, a copy of that one."""
    torch.manual_seed(0)
    made = RRNN(5, 2, 3, scoring_hidden=4, mode=mode, compile=compile, sync_free=sync_free).to(dtype)
    model = made if model is None else model
    x = torch.randn(3, 2, 5, dtype=dtype, requires_grad=True)
    output, _, traces = model(x)
    scores = torch.stack([t[0].best_score for t in traces])
    (output.square().sum() + scores.sum()).backward()
    return [output.detach(), scores.detach(), torch.stack([t[0].tuple_pos for t in traces]), x.grad] + [
        p.grad for p in model.parameters()]


def _fail(*args, **kwargs):
    raise RuntimeError("no compiler here")


@pytest.mark.parametrize("broken", ["torch.compile", "compiled call"])
def test_compile_failure_warns_once_and_runs_eagerly(monkeypatch, broken):
    monkeypatch.setattr(torch, "compile", _fail if broken == "torch.compile" else lambda fn, **kw: _fail)
    eager = {mode: _run(mode, False) for mode in ("hard", "soft")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fallen = {mode: _run(mode, True) for mode in ("hard", "soft")}
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 2  # once per model
    assert all("no compiler here" in m and "running eagerly" in m for m in messages)
    for mode in eager:
        for a, b in zip(eager[mode], fallen[mode]):
            assert a is not None and torch.equal(a, b)


def test_a_failure_switches_off_compilation_of_its_own_model_only(monkeypatch):
    torch.manual_seed(0)
    failing, other = (RRNN(5, 2, 3, scoring_hidden=4, compile=True).double() for _ in range(2))
    monkeypatch.setattr(torch, "compile", _fail)
    with pytest.warns(RuntimeWarning, match="running eagerly"):
        _run("soft", True, model=failing)
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)  # a compiler that works
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _run("soft", True, model=other)
        _run("soft", True, model=failing)  # stays eager, without a second warning
    assert failing.cell.compiled.fell_back and not other.cell.compiled.fell_back


def test_compile_bench_reports_the_fallback(monkeypatch):
    monkeypatch.setattr(torch, "compile", _fail)
    with pytest.warns(RuntimeWarning, match="running eagerly"):
        result = compare_compile(p=4, batch=2, steps=2, n_iterations=2, scoring_hidden=3, repeat=1,
                                 candidate_norm="sample", tau_units="std")
    assert result["fell_back"] is True and result["max_abs_output_difference"] == 0.0
    assert result["config"]["candidate_norm"] == "sample" and result["config"]["tau_units"] == "std"
    assert result["first_compiled_step_s"] > 0 and result["eager_s"] > 0 and result["compiled_s"] > 0


def test_the_config_key_reaches_the_search():
    config = resolve_config(overrides={"model": "rrnn", "compile": "true"})
    assert config.compile is True
    assert _core(config, ("h",)).cell.compile_search is True
    assert _core(resolve_config(), ("h",)).cell.compile_search is False


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_the_compile_mode_reaches_torch_compile(monkeypatch, model, mode):
    modes = []

    def compile(fn, **kwargs):
        modes.append(kwargs["mode"])
        return fn

    monkeypatch.setattr(torch, "compile", compile)
    config = resolve_config(overrides={"model": model, "compile": "true", "compile_mode": mode,
                                       "hidden_size": "5", "scoring_hidden": "4", "n_iterations": "2"})
    core = _core(config, ("h",)).double()
    core(torch.randn(2, 3, 5, dtype=torch.float64))
    assert modes == [mode]


def test_an_unknown_compile_mode_is_an_error():
    with pytest.raises(CellGraphError, match="unknown compile mode 'fast'"):
        RRNN(5, 2, 2, compile=True, compile_mode="fast")
    with pytest.raises(Exception, match="compile_mode"):
        resolve_config(overrides={"compile_mode": "fast"})


@pytest.mark.slow
@pytest.mark.parametrize("mode, sync_free", [("soft", None), ("hard", None), ("soft", True)])
def test_compiled_and_eager_agree(monkeypatch, mode, sync_free):
    """Real compilation (tens of seconds on a 2-core machine): same trees, values and
    gradients within float32 rounding; also for the sync-free search, a GPU's compiled one."""
    eager = _run(mode, False, torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback would make this test vacuous
        compiled = _run(mode, True, torch.float32, sync_free=sync_free)
    assert torch.equal(eager[2], compiled[2])
    for a, b in zip(eager, compiled):
        if a is not None:
            torch.testing.assert_close(a.float(), b.float(), rtol=1e-4, atol=1e-5)


def test_compilation_is_announced_once(monkeypatch, capsys):
    """A line before the first compiled step (compilation is silent and long), one after it,
    none on later steps."""
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)  # "compiles" at once
    monkeypatch.delenv("CELLGRAPH_NO_PROGRESS", raising=False)
    torch.manual_seed(0)
    model = RRNN(5, 2, 3, scoring_hidden=4, mode="hard", compile=True).double()
    _run("hard", True, model=model)
    _run("hard", True, model=model)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("compiling the cell search with torch.compile")
    assert lines[1].startswith("compiled the cell search in ")


@pytest.mark.parametrize("path", ["traced", "sync-free"])
@pytest.mark.parametrize("mode, tau_units, norm", [("soft", "score", "none"), ("soft", "std", "none"),
                                                   ("soft", "std", "sample"), ("hard", "score", "none"),
                                                   ("straight-through", "score", "none")])
def test_the_paths_taken_when_traced_give_the_eager_results(monkeypatch, mode, tau_units, norm, path):
    """What the search does differently under ``torch.compile`` (the block op by op, the soft
    mixture rebuilt whole, the hard node gathered from every block), run eagerly, and what it
    does differently when sync-free (the same mixture and gather, every exclusion test dense):
    the trees are the same and values and gradients agree to float64 rounding."""
    def run(sync_free: bool):
        torch.manual_seed(0)
        model = RRNN(6, 2, 6, scoring_hidden=5, mode=mode, tau_units=tau_units, candidate_norm=norm,
                     sync_free=sync_free).double()
        x = torch.randn(5, 4, 6, dtype=torch.float64, requires_grad=True)
        output, _, traces = model(x)
        (output.square().sum() + sum(t[0].best_score.sum() for t in traces)).backward()
        picks = torch.stack([torch.stack([t[0].left, t[0].right, t[0].tuple_pos, t[0].op_pos, t[0].act_pos])
                             for t in traces])
        return picks, [output.detach(), x.grad] + [p.grad for p in model.parameters()]

    eager_picks, eager = run(False)
    if path == "traced":
        for module in (search_module, scoring):  # the search and its block read it
            monkeypatch.setattr(module, "is_compiling", lambda: True)
    traced_picks, traced = run(path == "sync-free")
    assert torch.equal(eager_picks, traced_picks)
    assert eager_picks[:, :, :, 1:].ne(eager_picks[:, :, :, :1]).any()  # not one tree everywhere
    # to rounding at the scale of the largest gradient: the hard node's reach 1e20 here, and
    # b2's is a sum of such terms that cancels to ~1e4
    scale = max(a.abs().max().item() for a in eager)
    for a, b in zip(eager, traced):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12 * scale)


def test_the_compiled_search_runs_with_gradients_only(monkeypatch):
    """Training steps run the compiled search, evaluation (no gradients) the eager one."""
    calls = []

    def compile(fn, **kwargs):
        def traced(*args):
            calls.append(torch.is_grad_enabled())
            return fn(*args)
        return traced

    monkeypatch.setattr(torch, "compile", compile)
    torch.manual_seed(0)
    model = RRNN(5, 2, 3, scoring_hidden=4, compile=True).double()
    x = torch.randn(3, 2, 5, dtype=torch.float64)
    with torch.no_grad():
        model(x)
    assert calls == []
    model(x)
    assert calls == [True] * 3  # one search per time step


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_a_compiled_model_recomputes_its_steps(monkeypatch, model):
    """With ``recompute``, the backward pass runs the compiled function again under the
    checkpoint: that must not read as a failure of the compiler (the checkpoint used to stop
    its recomputation with an exception out of it)."""
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)  # "compiles" at once

    def run(recompute: bool):
        torch.manual_seed(0)
        made = (RRNN(5, 2, 3, scoring_hidden=4, compile=True, recompute=recompute) if model == "rrnn"
                else RRNNGRU(5, 2, scoring_hidden=4, compile=True, recompute=recompute)).double()
        x = torch.randn(3, 2, 5, dtype=torch.float64)
        made(x)[0].square().sum().backward()
        return (made.cell if model == "rrnn" else made).compiled, [p.grad for p in made.parameters()]

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _, expected = run(False)
        compiled, grads = run(True)
    assert not compiled.fell_back
    for a, b in zip(expected, grads):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_an_error_of_the_compiled_function_is_not_taken_for_the_compilers(monkeypatch):
    def search(*args):
        raise CellGraphError("sample 0 has no eligible candidate")

    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    compiled = Compiled(search, "the cell search")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(CellGraphError, match="no eligible candidate"):
            compiled()
    assert not compiled.fell_back


def _run_gru(compile: bool, tau: float = 1.0, model: RRNNGRU | None = None):
    """Output, best scores and all gradients of a tiny RRNN-GRU in soft mode (fixed seed)."""
    torch.manual_seed(0)
    model = RRNNGRU(5, 2, scoring_hidden=4, compile=compile) if model is None else model
    model.zero_grad(set_to_none=True)
    model.cell.tau = tau
    torch.manual_seed(1)
    x = torch.randn(3, 2, 5, requires_grad=True)
    output, _, traces = model(x)
    scores = torch.stack([t[0].best_score for t in traces])
    (output.square().sum() + scores.sum()).backward()
    return [output.detach(), scores.detach(), x.grad] + [p.grad for p in model.parameters()]


def test_rrnn_gru_compile_failure_warns_once_and_runs_eagerly(monkeypatch):
    monkeypatch.setattr(torch, "compile", _fail)
    eager = _run_gru(False)
    with pytest.warns(RuntimeWarning, match="torch.compile of the RRNN-GRU step failed, running eagerly"):
        fallen = _run_gru(True)
    for a, b in zip(eager, fallen):
        assert a is not None and torch.equal(a, b)


def test_the_config_key_reaches_the_rrnn_gru_step():
    compiled = _core(resolve_config(overrides={"model": "rrnn-gru", "compile": "true"}), ("h",))
    assert compiled.compiled is not None and compiled.compiled.fn is compiled.cell
    assert _core(resolve_config(overrides={"model": "rrnn-gru"}), ("h",)).compiled is None


@pytest.mark.slow
def test_compiled_rrnn_gru_agrees_and_takes_a_new_tau_without_recompiling():
    """Real compilation: the same values and gradients as eager, and tau, annealed during
    training, is an input of the compiled step, not a constant that forces a new graph."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = RRNNGRU(5, 2, scoring_hidden=4, compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback would make this test vacuous
        for tau in (1.0, 0.3):
            compiled = _run_gru(True, tau, model)
            graphs = counters["stats"]["unique_graphs"]
            for a, b in zip(_run_gru(False, tau), compiled):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        _run_gru(True, 0.1, model)
    assert counters["stats"]["unique_graphs"] == graphs
