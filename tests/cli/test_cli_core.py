"""CLI commands ``target``, ``render`` and ``distance`` through ``cellgraph.cli.main``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from cellgraph.algorithms.distance import td, td_iso
from cellgraph.cell import registry
from cellgraph.cli import main
from cellgraph.export import jsonio
from cellgraph.export.draw import _ACT_LABELS as ACT_LABELS
from cellgraph.targets import target, target_names

ROOT = Path(__file__).resolve().parents[2]
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_target_sympy_prints_node_equations_and_states(capsys):
    code, out, err = run(capsys, "target", "gru", "--format", "sympy")
    lines = out.splitlines()
    assert code == 0 and not err
    assert lines[0].startswith("# gru") and len(lines) == 1 + 8 + 1 + 1
    assert lines[4] == "c_4 = sigma(W_r*x_t + W_r'*h_{t-1} + b_r)"
    assert lines[8] == "h_t = c_2 + c_7"
    assert lines[10].startswith("h_t = ") and "tanh(W_h*x_t" in lines[10]


def test_reading_cells_doc_shows_what_the_commands_print(capsys):
    """docs/reading-cells.md's worked example is the output of the commands it names, and it
    explains every operation and activation a form or a drawing can show."""
    doc = (ROOT / "docs" / "reading-cells.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n(.*?)```", doc, re.S)
    form = run(capsys, "target", "gru", "--format", "form")[1]
    equations = run(capsys, "target", "gru", "--format", "sympy")[1]
    assert blocks[0] == form and form.startswith("h = identity[add_3](")
    assert blocks[1] == equations.split("# gru: the states")[0]
    for name in (*registry.op_names(), *registry.activation_names()):
        assert f"`{name}`" in doc, name
    for symbol in (*(registry.op(n).symbol for n in registry.op_names()), *ACT_LABELS.values()):
        assert f"`{symbol}`" in doc, symbol


def test_target_json_tree_and_dag_round_trip(capsys):
    lstm = target("lstm")
    code, out, _ = run(capsys, "target", "lstm", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["format"] == "cellgraph.cell.tree" and [s["state"] for s in doc["states"]] == ["c", "h"]
    assert jsonio.load_cell(doc) == lstm.cell and jsonio.load_layout(doc) == lstm.layout
    code, out, _ = run(capsys, "target", "lstm", "--format", "json", "--dag")
    doc = json.loads(out)
    assert doc["format"] == "cellgraph.dag" and jsonio.load_cell(doc) == lstm.cell


def test_target_latex_to_file_and_dot_default_name(capsys, tmp_path, monkeypatch):
    code, out, _ = run(capsys, "target", "gru_torch", "--format", "latex", "-o", str(tmp_path / "g.tex"))
    tex = (tmp_path / "g.tex").read_text()
    assert code == 0 and out.strip() == str(tmp_path / "g.tex")
    assert tex.count(r"\begin{aligned}") == 2 and r"W_{hn} h_{t-1} + b_{hn}" in tex
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "target", "gru", "--format", "dot")[0] == 0
    assert (tmp_path / "gru.dot").read_text().startswith("digraph gru {")


@needs_dot
def test_target_svg(capsys, tmp_path):
    code, out, _ = run(capsys, "target", "gru", "--format", "svg", "-o", str(tmp_path / "gru.svg"))
    assert code == 0 and "<svg" in (tmp_path / "gru.svg").read_text()


def test_clean_errors(capsys, tmp_path, monkeypatch):
    code, out, err = run(capsys, "target", "transformer", "--format", "sympy")
    assert code == 2 and err.startswith("cellgraph target: error: unknown target 'transformer'")
    assert "Traceback" not in err
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    code, _, err = run(capsys, "target", "gru", "--format", "png", "-o", str(tmp_path / "g.png"))
    assert code == 2 and "apt-get install graphviz" in err and len(err.strip().splitlines()) == 1


def write(path, doc) -> str:
    jsonio.save(path, doc)
    return str(path)


def test_render_tree_and_dag_documents(capsys, tmp_path):
    lstm = target("lstm")
    tree_doc = write(tmp_path / "t.json", jsonio.dump_tree({g.state: g.unfold() for g in lstm.cell}, lstm.layout))
    code, out, _ = run(capsys, "render", tree_doc, "-o", str(tmp_path / "t.dot"))
    src = (tmp_path / "t.dot").read_text()
    assert code == 0 and "cluster_1" in src and "W<sub>o</sub>" in src
    gru = target("gru")
    gru_doc = write(tmp_path / "g.json", jsonio.dump_tree(gru.graph.unfold(), gru.layout))
    run(capsys, "render", gru_doc, "-o", str(tmp_path / "gt.dot"))
    run(capsys, "render", gru_doc, "-o", str(tmp_path / "gd.dot"), "--view", "dag")
    assert (tmp_path / "gt.dot").read_text().count("shape=box") == 9  # z_t twice in the tree
    assert (tmp_path / "gd.dot").read_text().count("shape=box") == 8


def test_render_bad_input(capsys, tmp_path):
    bad = write(tmp_path / "bad.json", {"op": "add", "act": "foo", "tuple": 0,
                                         "children": [{"leaf": "x"}, {"leaf": "h"}]})
    code, _, err = run(capsys, "render", bad, "-o", str(tmp_path / "x.dot"))
    assert code == 2 and "bad.json: act: unknown activation 'foo'" in err
    code, _, err = run(capsys, "render", str(tmp_path / "none.json"), "-o", str(tmp_path / "x.dot"))
    assert code == 2 and "does not exist" in err
    good = write(tmp_path / "good.json", jsonio.dump_cell(target("gru").cell))
    code, _, err = run(capsys, "render", good, "-o", str(tmp_path / "x.jpg"))
    assert code == 2 and "unknown drawing format" in err


def with_vectors(tree, seed: int):
    rng = np.random.default_rng(seed)
    return tree.with_vectors({e: rng.normal(size=5) for e in tree.expr.walk()})


def test_distance_prints_td_and_td_iso(capsys, tmp_path):
    gru = target("gru")
    tgt = with_vectors(gru.graph.unfold(), 0)
    pred = with_vectors(gru.graph.unfold(), 1)
    pred_file = write(tmp_path / "pred.json", jsonio.dump_tree(pred))
    tgt_file = write(tmp_path / "tgt.json", jsonio.dump_cell(gru.cell, vectors={
        pos.expr: pos.vector for pos in tgt.subtrees()}))
    code, out, _ = run(capsys, "distance", pred_file, tgt_file)
    assert code == 0 and out == repr(td(pred, tgt)) + "\n" and float(out) > 0
    code, out, _ = run(capsys, "distance", pred_file, tgt_file, "--iso")
    assert out == repr(td_iso(pred, tgt)) + "\n"
    # a swapped copy of the target is at distance 0 only up to isomorphism
    swapped = write(tmp_path / "swapped.json", jsonio.dump_tree(tgt.swap()))
    assert float(run(capsys, "distance", swapped, tgt_file)[1]) > 0
    assert float(run(capsys, "distance", swapped, tgt_file, "--iso")[1]) == 0.0


def test_distance_needs_vectors(capsys, tmp_path):
    gru = target("gru")
    bare = write(tmp_path / "bare.json", jsonio.dump_cell(gru.cell))
    full_tree = with_vectors(gru.graph.unfold(), 0)
    full = write(tmp_path / "full.json", jsonio.dump_tree(full_tree))
    code, _, err = run(capsys, "distance", full, bare)
    assert code == 2 and "bare.json has no vectors on its nodes" in err and "cellgraph export" in err
    some = {e: np.ones(5) for e in gru.graph.root.walk() if e is not gru.graph.root}
    partial = write(tmp_path / "partial.json", jsonio.dump_cell(gru.cell, vectors=some))
    code, _, err = run(capsys, "distance", full, partial)
    assert code == 2 and "partial.json: internal node at heap label 1" in err and "has no vector" in err


@pytest.mark.parametrize("command", ["target", "render", "distance", "tune"])
def test_help(capsys, command):
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    out, err = capsys.readouterr()
    assert stop.value.code == 0 and f"usage: cellgraph {command}" in out and err == ""


def test_the_old_name_of_tune_shows_its_help_and_says_so(capsys):
    """``cellgraph search`` was the hyper-parameter search's name before ``cellgraph tune``."""
    with pytest.raises(SystemExit) as stop:
        main(["search", "--help"])
    out, err = capsys.readouterr()
    assert stop.value.code == 0 and "usage: cellgraph tune" in out
    assert err == "cellgraph search is the old name of cellgraph tune\n"


def test_an_argument_with_a_nul_byte_is_a_clean_error(capsys):
    """Found by the full CLI fuzzer: ``cellgraph distance '\\x00' baseline`` ended in a
    ValueError traceback from pathlib."""
    with pytest.raises(SystemExit) as exit_:
        main(["distance", "\x00", "baseline"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "holds a NUL byte" in err and "Traceback" not in err


@pytest.mark.parametrize("name", target_names())
def test_every_target_prints_and_draws(capsys, tmp_path, name):
    from cellgraph.cli.commands.target import NAMES

    assert NAMES.split(", ") == list(target_names())
    code, out, err = run(capsys, "target", name, "--format", "sympy")
    assert code == 0 and not err and out.startswith(f"# {name}: one equation per generated node")
    nodes = out.split(f"# {name}: the states")[0].splitlines()[1:]
    assert len(nodes) == sum(len(g.internal_nodes()) for g in target(name).cell)
    form = run(capsys, "target", name, "--format", "form")[1]
    assert form.startswith(f"{target(name).cell.graphs[0].state} = ")
    code, out, _ = run(capsys, "target", name, "--format", "dot", "-o", str(tmp_path / f"{name}.dot"))
    assert code == 0 and (tmp_path / f"{name}.dot").read_text().startswith(f"digraph {name} {{")
