"""Graphviz drawings of cells (paper, Figure 1): labels, views, clusters, missing ``dot``."""

from __future__ import annotations

import re
import shutil

import pytest

from cellgraph.cell.expr import Node, Role, h, x
from cellgraph.cell.tree import unfold
from cellgraph.errors import CellGraphError
from cellgraph.export import draw
from cellgraph.targets import target


def node_lines(source: str) -> list[str]:
    return [l for l in source.splitlines() if re.match(r"\s*n\d+ \[", l)]


def edge_lines(source: str) -> list[str]:
    return [l for l in source.splitlines() if "->" in l]


def test_dag_view_of_gru_with_layout():
    gru = target("gru")
    src = draw.to_dot(gru.cell, layout=gru.layout).source
    nodes = node_lines(src)
    assert len(nodes) == 3 + 8  # x, h, 0 once each; 8 generated nodes
    assert len(edge_lines(src)) == 16
    assert "W<sub>r</sub>" in src and "W<sub>r&#x27;</sub>" in src and "<I>" in src
    assert "(+, σ, r)" in src and "(⊙, id, id)" in src and "(+, 1−, id)" in src
    root = [l for l in nodes if "peripheries=2" in l]
    assert len(root) == 1 and "h<sub>t</sub>" in root[0]
    for name, role in (("x", Role.DATA), ("h", Role.PREV), ("zero", Role.CONST)):
        line = next(l for l in nodes if f'tooltip="{name} (' in l)
        assert draw.ROLE_COLORS[role] in line


def test_tree_view_unfolds_shared_nodes():
    gru = target("gru")
    src = draw.to_dot(gru.cell, view="tree").source
    tree = gru.graph.unfold()
    assert tree.n_internal() == 9  # z_t is used twice
    assert len(node_lines(src)) == 9 + 10  # every position: 9 internal, 10 leaves
    assert src.count("c<sub>1</sub>") == 2  # both positions of z_t carry its name
    assert "L<sub>0</sub>" in src and "R<sub>3</sub>" in src  # no layout: L_r, R_r


def test_tree_view_follows_swapped_children():
    n = Node("add", "tanh", 1, x, h)
    swapped = draw.to_dot(unfold(n).swap(), view="tree").source
    edges = edge_lines(swapped)
    assert "R<sub>1</sub>" in edges[0] and "L<sub>1</sub>" in edges[1]
    plain = edge_lines(draw.to_dot(n, view="tree").source)
    assert "L<sub>1</sub>" in plain[0] and "R<sub>1</sub>" in plain[1]


def test_multi_state_cell_is_clustered():
    lstm = target("lstm")
    src = draw.to_dot(lstm.cell, layout=lstm.layout).source
    assert "subgraph cluster_0" in src and "subgraph cluster_1" in src
    assert "state c<sub>t</sub>" in src and "state h<sub>t</sub>" in src
    dashed = [l for l in edge_lines(src) if "style=dashed" in l]
    assert len(dashed) == 1  # c_t made by run 1, used once by run 2
    assert draw.ROLE_COLORS[Role.CURRENT] in src


def test_render_dot_and_svg(tmp_path):
    gru = target("gru")
    out = draw.render(gru.cell, tmp_path / "gru.dot", layout=gru.layout)
    assert out.read_text().startswith("digraph gru {")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz 'dot' is not installed")
    svg = draw.render(gru.cell, tmp_path / "gru.svg", view="tree", layout=gru.layout)
    assert "<svg" in svg.read_text()


def test_missing_dot_program_is_a_clear_error_and_dot_source_still_works(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    gru = target("gru")
    with pytest.raises(CellGraphError, match=r"apt-get install graphviz.*\.dot source"):
        draw.render(gru.cell, tmp_path / "gru.svg")
    assert not (tmp_path / "gru.svg").exists()
    assert draw.render(gru.cell, tmp_path / "gru.gv").read_text().startswith("digraph")


def test_bad_arguments(tmp_path):
    gru = target("gru")
    with pytest.raises(CellGraphError, match="unknown view"):
        draw.to_dot(gru.cell, view="forest")
    with pytest.raises(CellGraphError, match="unknown drawing format '.jpg'"):
        draw.render(gru.cell, tmp_path / "gru.jpg")
    with pytest.raises(CellGraphError, match="state names to Trees"):
        draw.to_dot({"h": gru.graph})


def test_every_drawing_carries_its_key():
    """A reader of a drawing alone can decode it: the key under it names every operation and
    activation symbol, the colours of vectors and matrices, and each leaf fill."""
    from cellgraph.cell import registry

    src = draw.to_dot(target("gru").cell, view="tree").source
    (graph_line,) = [line for line in src.splitlines() if line.lstrip().startswith("graph [")]
    assert "labelloc=b" in graph_line and "(op, activation, weight tuple)" in graph_line
    for name in (*registry.op_names(), *registry.activation_names()):
        assert name in graph_line
    assert "⊙ mul" in graph_line and "σ sigmoid" in graph_line and "1− one_minus" in graph_line
    for role, colour in draw.ROLE_COLORS.items():
        assert f'<font color="{colour}">■</font>' in graph_line
    assert "previous state" in graph_line and "constant" in graph_line
