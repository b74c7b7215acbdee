"""JSON interchange of cell trees and DAGs, versioned (format described in ``docs/FORMAT.md``).

Two document kinds, both version 1 (paper, Sec. 3.1-3.3; the DAG and the tree,
docs/paper-notes.md, *Objects: leaves, nodes, tuples*):

* ``cellgraph.cell.tree``: the unfolded tree, nested. A leaf is ``{"leaf": "x", "vector": [...]}``
  (``"role"`` needed unless implied: ``x`` data, ``h``/``c`` prev, ``zero``/``one`` const),
  an internal node ``{"op": "add", "act": "tanh", "tuple": 2, "children": [LEFT, RIGHT],
  "vector": [...]}`` with ``"edges": ["R", "L"]`` when its children were swapped together
  with their edge matrices. A bare nested node is accepted as a one-state tree document.
* ``cellgraph.dag``: the cell graph, ``{"nodes": [{"id": 0, "leaf": "x"}, {"id": 2, "op":
  ..., "children": [LEFT_ID, RIGHT_ID]}, ...], "root": 2}``; shared nodes appear once.

A document holds one state (``"state"`` plus ``"tree"``, or ``"nodes"`` and ``"root"``) or,
for multi-state cells such as LSTM, ``"states": [{"state": "c", ...}, {"state": "h", ...}]``
in run order. An optional ``"layout"`` names the weight tuples.

Loading validates everything and raises :class:`~cellgraph.errors.FormatError` with the
path of the bad field, e.g. ``tree.children[1].act: unknown activation 'foo' ...``. Nothing
is ever evaluated as code. :func:`save` writes atomically.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from cellgraph.cell import registry
from cellgraph.cell.expr import IMPLIED_ROLES, Expr, Leaf, Node
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.cell.names import as_multicell
from cellgraph.cell.tree import EDGES, SWAPPED, Tree
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.files import atomic_write, read_json

__all__ = [
    "TREE_FORMAT",
    "DAG_FORMAT",
    "VERSION",
    "Document",
    "tree_json",
    "dump_tree",
    "dump_cell",
    "dump_layout",
    "cell_document",
    "save",
    "load_document",
    "load_tree",
    "load_trees",
    "load_cell",
    "load_layout",
]

TREE_FORMAT = "cellgraph.cell.tree"
DAG_FORMAT = "cellgraph.dag"
VERSION = 1

_BODY_KEYS = {TREE_FORMAT: ("tree",), DAG_FORMAT: ("nodes", "root")}
_LEAF_KEYS = {"leaf", "role", "vector"}
_NODE_KEYS = {"op", "act", "tuple", "children", "edges", "vector"}
_TUPLE_KEYS = {"name", "L", "R", "b", "identity"}

Source = str | Path | Mapping[str, Any]


@dataclass(frozen=True)
class Document:
    """A loaded document: ``kind`` (``"tree"`` or ``"dag"``), the unfolded tree of every
    state in run order (vectors where the document has them), the cell and the layout."""

    kind: str
    trees: dict[str, Tree]
    cell: MultiCell
    layout: Layout | None = None

    def tree(self, state: str | None = None) -> Tree:
        """The tree of ``state``; by default the output state (the last run)."""
        if state is None:
            return self.trees[self.cell.output.state]
        if state not in self.trees:
            raise CellGraphError(f"no state {state!r} in the document (has {', '.join(self.trees)})")
        return self.trees[state]


# --- writing ---------------------------------------------------------------------------
def _node_fields(e: Expr) -> dict[str, Any]:
    if isinstance(e, Leaf):
        out: dict[str, Any] = {"leaf": e.name}
        if IMPLIED_ROLES.get(e.name) is not e.role:
            out["role"] = e.role.value
        return out
    return {"op": e.op, "act": e.act, "tuple": e.tuple}


def _vector_json(v: Any) -> list[float]:
    a = np.asarray(v, dtype=np.float64).ravel()
    if not np.isfinite(a).all():
        raise CellGraphError(f"vector {a.tolist()[:8]}... has non-finite entries; the format stores finite numbers")
    return a.tolist()


def tree_json(tree: Tree) -> dict[str, Any]:
    """The bare nested form of a tree (no format header)."""
    out = _node_fields(tree.expr)
    if not tree.is_leaf:
        out["children"] = [tree_json(c) for c in tree.children]
        if tree.swapped:
            out["edges"] = list(tree.edges)
    if tree.vector is not None:
        out["vector"] = _vector_json(tree.vector)
    return out


def dump_layout(layout: Layout) -> list[dict[str, Any]]:
    return [asdict(t) for t in layout.tuples]


def _document(fmt: str, bodies: list[dict[str, Any]], layout: Layout | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"format": fmt, "version": VERSION}
    if len(bodies) == 1:
        doc.update(bodies[0])
    else:
        doc["states"] = bodies
    if layout is not None:
        doc["layout"] = dump_layout(layout)
    return doc


def dump_tree(trees: Tree | Mapping[str, Tree], layout: Layout | None = None,
              state: str = "h") -> dict[str, Any]:
    """A ``cellgraph.cell.tree`` document of one tree (state ``state``) or of a mapping
    ``state -> tree`` in run order."""
    items = {state: trees} if isinstance(trees, Tree) else dict(trees)
    return _document(TREE_FORMAT, [{"state": s, "tree": tree_json(t)} for s, t in items.items()], layout)


def dump_cell(cell: Expr | CellGraph | MultiCell, layout: Layout | None = None,
              vectors: Mapping[Expr, Any] | None = None) -> dict[str, Any]:
    """A ``cellgraph.dag`` document; node ids are ``0..n-1`` per state, children first.
    ``vectors`` (DAG node -> vector, e.g. a backend's evaluation) adds ``"vector"``s."""
    bodies = []
    for g in as_multicell(cell):
        ids = {e: i for i, e in enumerate(g.nodes())}
        nodes = []
        for e, i in ids.items():
            entry = {"id": i, **_node_fields(e)}
            if isinstance(e, Node):
                entry["children"] = [ids[e.left], ids[e.right]]
            if vectors is not None and e in vectors:
                entry["vector"] = _vector_json(vectors[e])
            nodes.append(entry)
        bodies.append({"state": g.state, "nodes": nodes, "root": ids[g.root]})
    return _document(DAG_FORMAT, bodies, layout)


def cell_document(cell: Expr | CellGraph | MultiCell, layout: Layout | None = None,
                  vectors: Mapping[Expr, Any] | None = None, dag: bool = False) -> dict[str, Any]:
    """``cell`` as a ``cellgraph.cell.tree`` document (every state unfolded) or, with ``dag``, a
    ``cellgraph.dag`` one; ``vectors`` (node -> vector, every node of the cell) puts each
    node's vector on it, as ``cellgraph distance`` needs."""
    if dag:
        return dump_cell(cell, layout, vectors)
    trees = {g.state: g.unfold() if vectors is None else g.unfold().with_vectors(vectors)
             for g in as_multicell(cell)}
    return dump_tree(trees, layout)


def save(path: str | Path, document: Mapping[str, Any]) -> Path:
    """Write a document as JSON, atomically (temporary file, then rename)."""
    path = Path(path)
    atomic_write(path, (json.dumps(document, indent=1, allow_nan=False) + "\n").encode())
    return path


# --- reading ---------------------------------------------------------------------------
def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class _Parser:
    """Validating reader of one document; remembers the vector length seen first."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.layout: Layout | None = None
        self.length: tuple[int, str] | None = None

    def error(self, path: str, message: str) -> FormatError:
        return FormatError(path or "(document)", message, self.source)

    def obj(self, value: Any, path: str, keys: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(path, f"expected a JSON object, got {_kind(value)}")
        if keys is not None:
            extra = sorted(str(k) for k in value if k not in keys)
            if extra:
                raise self.error(_at(path, extra[0]), f"unknown field (allowed: {', '.join(sorted(keys))})")
        return value

    def string(self, obj: dict[str, Any], key: str, path: str) -> str:
        if key not in obj:
            raise self.error(_at(path, key), "missing")
        value = obj[key]
        if not isinstance(value, str) or not value:
            raise self.error(_at(path, key), f"expected a non-empty string, got {_kind(value)}")
        return value

    # --- fields ------------------------------------------------------------------------
    def vector(self, obj: dict[str, Any], path: str) -> np.ndarray | None:
        if "vector" not in obj:
            return None
        path, value = _at(path, "vector"), obj["vector"]
        if not isinstance(value, list) or not value:
            raise self.error(path, f"expected a non-empty list of numbers, got {_kind(value)}")
        for i, a in enumerate(value):
            if isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a):
                raise self.error(_at(path, i), f"not a finite number ({_kind(a)})")
        if self.length is None:
            self.length = (len(value), path)
        elif len(value) != self.length[0]:
            raise self.error(path, f"length {len(value)} differs from length {self.length[0]} "
                                   f"of {self.length[1]} (all vectors need one length p)")
        return np.asarray(value, dtype=np.float64)

    def leaf(self, obj: dict[str, Any], path: str, extra_keys: frozenset[str] = frozenset()) -> Leaf:
        if "children" in obj:
            raise self.error(_at(path, "children"), "a leaf cannot have children")
        self.obj(obj, path, _LEAF_KEYS | extra_keys)
        name = self.string(obj, "leaf", path)
        role = obj.get("role")
        if role is not None and not isinstance(role, str):
            raise self.error(_at(path, "role"), f"expected a string, got {_kind(role)}")
        try:
            return Leaf(name, role)
        except CellGraphError as err:
            raise self.error(_at(path, "role" if "role" in obj else "leaf"), str(err)) from None

    def node_fields(self, obj: dict[str, Any], path: str) -> tuple[str, str, int]:
        op, act = self.string(obj, "op", path), self.string(obj, "act", path)
        for key, lookup in (("op", registry.op), ("act", registry.activation)):
            try:
                lookup(obj[key])
            except CellGraphError as err:
                raise self.error(_at(path, key), str(err)) from None
        if "tuple" not in obj:
            raise self.error(_at(path, "tuple"), "missing (index of the weight tuple)")
        index = obj["tuple"]
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise self.error(_at(path, "tuple"), f"expected an integer >= 0, got {_kind(index)}")
        if self.layout is not None:
            try:
                self.layout.check_index(index)
            except CellGraphError as err:
                raise self.error(_at(path, "tuple"), str(err)) from None
        return op, act, index

    def children(self, obj: dict[str, Any], path: str) -> list[Any]:
        value = obj.get("children")
        if not isinstance(value, list) or len(value) != 2:
            raise self.error(_at(path, "children"),
                             f"an internal node needs a list of two children, got {_kind(value)}")
        return value

    # --- bodies ------------------------------------------------------------------------
    def tree(self, value: Any, path: str) -> Tree:
        obj = self.obj(value, path)
        if "leaf" in obj:
            if "op" in obj:
                raise self.error(path, "a node has either 'leaf' or 'op', not both")
            return Tree(self.leaf(obj, path), vector=self.vector(obj, path))
        if "op" not in obj:
            raise self.error(path, "a node needs 'leaf' (a leaf) or 'op' (an internal node)")
        self.obj(obj, path, _NODE_KEYS)
        op, act, index = self.node_fields(obj, path)
        vector = self.vector(obj, path)  # before the children: errors follow reading order
        kids = [self.tree(c, _at(_at(path, "children"), i)) for i, c in enumerate(self.children(obj, path))]
        edges = obj.get("edges", list(EDGES))
        if not isinstance(edges, list) or tuple(edges) not in (EDGES, SWAPPED):
            raise self.error(_at(path, "edges"), f'expected ["L", "R"] or ["R", "L"], got {edges!r}')
        if tuple(edges) == SWAPPED and not registry.op(op).commutative:
            raise self.error(_at(path, "edges"), f"children of non-commutative op {op!r} cannot be swapped")
        by_edge = dict(zip(edges, kids))
        expr = Node(op, act, index, by_edge["L"].expr, by_edge["R"].expr)
        return Tree(expr, tuple(kids), tuple(edges), vector)

    def dag(self, body: dict[str, Any], path: str) -> Tree:
        nodes_path = _at(path, "nodes")
        nodes = body["nodes"]
        if not isinstance(nodes, list) or not nodes:
            raise self.error(nodes_path, f"expected a non-empty list of nodes, got {_kind(nodes)}")
        entries: dict[Any, tuple[str, dict[str, Any]]] = {}
        for i, entry in enumerate(nodes):
            p = _at(nodes_path, i)
            entry = self.obj(entry, p)
            if "id" not in entry:
                raise self.error(_at(p, "id"), "missing")
            nid = entry["id"]
            if isinstance(nid, bool) or not isinstance(nid, (int, str)):
                raise self.error(_at(p, "id"), f"expected an integer or string, got {_kind(nid)}")
            if nid in entries:
                raise self.error(_at(p, "id"), f"duplicate node id {nid!r} (also {entries[nid][0]})")
            entries[nid] = (p, entry)
        root = body["root"]
        if isinstance(root, bool) or not isinstance(root, (int, str)) or root not in entries:
            raise self.error(_at(path, "root"), f"unknown node id {root!r}")
        built: dict[Any, Tree] = {}
        self._build_dag(root, entries, built)
        unused = [p for nid, (p, _) in entries.items() if nid not in built]
        if unused:
            raise self.error(unused[0], "not reachable from the root")
        return built[root]

    def _build_dag(self, root: Any, entries: dict[Any, tuple[str, dict[str, Any]]],
                   built: dict[Any, Tree]) -> None:
        """Build the trees of ``root`` and its descendants, children first, iteratively;
        a child that is still open on the stack closes a cycle."""
        open_ids: set[Any] = set()
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            nid, expanded = stack.pop()
            if nid in built:
                continue
            p, entry = entries[nid]
            if "op" not in entry:
                built[nid] = Tree(self.leaf(entry, p, frozenset({"id"})), vector=self.vector(entry, p))
                continue
            self.obj(entry, p, _NODE_KEYS | {"id"})
            if "edges" in entry:
                raise self.error(_at(p, "edges"), "a DAG node lists its children as [left, right]")
            kids = self.children(entry, p)
            if expanded:
                open_ids.discard(nid)
                op, act, index = self.node_fields(entry, p)
                left, right = built[kids[0]], built[kids[1]]
                built[nid] = Tree(Node(op, act, index, left.expr, right.expr), (left, right),
                                  vector=self.vector(entry, p))
                continue
            open_ids.add(nid)
            stack.append((nid, True))
            for k, cid in reversed(list(enumerate(kids))):
                cp = _at(_at(p, "children"), k)
                if isinstance(cid, bool) or not isinstance(cid, (int, str)) or cid not in entries:
                    raise self.error(cp, f"unknown node id {cid!r}")
                if cid in open_ids:
                    raise self.error(cp, f"node {cid!r} is an ancestor of node {nid!r}: the graph has a cycle")
                stack.append((cid, False))

    def layout_of(self, value: Any) -> Layout:
        if not isinstance(value, list):
            raise self.error("layout", f"expected a list of tuples, got {_kind(value)}")
        specs = []
        for i, item in enumerate(value):
            p = _at("layout", i)
            item = self.obj(item, p, _TUPLE_KEYS)
            fields = {"name": self.string(item, "name", p)}
            for key in ("L", "R", "b"):
                if not isinstance(item.get(key, ""), str):
                    raise self.error(_at(p, key), f"expected a string, got {_kind(item[key])}")
                fields[key] = item.get(key, "")
            if not isinstance(item.get("identity", False), bool):
                raise self.error(_at(p, "identity"), f"expected true or false, got {_kind(item['identity'])}")
            specs.append(TupleSpec(**fields, identity=item.get("identity", False)))
        try:
            return Layout(tuple(specs))
        except CellGraphError as err:
            raise self.error("layout", str(err)) from None

    def document(self, value: Any) -> Document:
        doc = self.obj(value, "")
        if "format" not in doc:
            if "leaf" in doc or "op" in doc:
                return self._finish("tree", {"h": self.tree(doc, "")})
            raise self.error("format", f"missing: expected {TREE_FORMAT!r} or {DAG_FORMAT!r} "
                                       "(or a bare tree node with 'leaf' or 'op')")
        fmt = doc["format"]
        if not isinstance(fmt, str) or fmt not in _BODY_KEYS:
            raise self.error("format", f"unknown format {fmt!r} (known: {TREE_FORMAT}, {DAG_FORMAT})")
        version = doc.get("version")
        if version != VERSION or isinstance(version, bool):
            raise self.error("version", f"unsupported version {version!r} (this cellgraph reads {VERSION})")
        body_keys = set(_BODY_KEYS[fmt])
        self.obj(doc, "", {"format", "version", "layout", "states", "state"} | body_keys)
        if "layout" in doc:
            self.layout = self.layout_of(doc["layout"])
        if "states" in doc:
            clash = sorted(k for k in doc if k in body_keys | {"state"})
            if clash:
                raise self.error(clash[0], "give either 'states' or one state's fields, not both")
            runs = doc["states"]
            if not isinstance(runs, list) or not runs:
                raise self.error("states", f"expected a non-empty list, got {_kind(runs)}")
            bodies = [(self.obj(b, _at("states", i), body_keys | {"state"}), _at("states", i))
                      for i, b in enumerate(runs)]
        else:
            bodies = [(doc, "")]
        trees: dict[str, Tree] = {}
        for body, path in bodies:
            state = self.string(body, "state", path) if "state" in body or path else "h"
            if state in trees:
                raise self.error(_at(path, "state"), f"state {state!r} appears twice")
            missing = sorted(body_keys - set(body))
            if missing:
                raise self.error(_at(path, missing[0]), "missing")
            trees[state] = (self.tree(body["tree"], _at(path, "tree")) if fmt == TREE_FORMAT
                            else self.dag(body, path))
        return self._finish(fmt.rsplit(".", 1)[1], trees)

    def _finish(self, kind: str, trees: dict[str, Tree]) -> Document:
        try:
            cell = MultiCell(tuple(CellGraph(t.expr, s) for s, t in trees.items()))
        except CellGraphError as err:
            raise self.error("states", str(err)) from None
        return Document(kind, trees, cell, self.layout)


def _kind(value: Any) -> str:
    """A short description of a JSON value for messages."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    text = json.dumps(value, default=str)
    return f"{names.get(type(value), type(value).__name__)} {text[:40]}{'...' if len(text) > 40 else ''}"


def load_document(src: Source) -> Document:
    """Read and validate a document from a path or an already parsed JSON object."""
    if isinstance(src, (str, Path)):
        source: str | None = str(src)
        value = read_json(src)
    else:
        source, value = None, src
    try:
        return _Parser(source).document(value)
    except RecursionError:
        raise FormatError("", "the document is nested too deeply", source) from None


def load_tree(src: Source, state: str | None = None) -> Tree:
    """The tree of ``state`` (default: the output state, the last run) of a tree or DAG
    document; a DAG is unfolded."""
    return load_document(src).tree(state)


def load_trees(src: Source) -> dict[str, Tree]:
    """The tree of every state, in run order."""
    return load_document(src).trees


def load_cell(src: Source) -> MultiCell:
    """The cell of a tree or DAG document (a one-state document gives a one-run cell)."""
    return load_document(src).cell


def load_layout(src: Source) -> Layout | None:
    """The document's layout, if it has one."""
    return load_document(src).layout
