"""Expression nodes of a cell: leaves and generated nodes (paper, Sec. 3.1-3.2;
docs/paper-notes.md, *Objects: leaves, nodes, tuples*).

A generated node holds ``c = u(o(L_r c_i, R_r c_j) + b_r)``: binary operation ``op``,
activation ``act``, weight tuple index ``tuple`` (0-based into a :class:`~cellgraph.cell.layout.Layout`),
left child ``c_i`` (its edge carries ``L_r``) and right child ``c_j`` (edge ``R_r``).

Nodes are immutable and compared structurally, as sympy's ``Basic``: ``node.func(*node.args)
== node``, equal nodes hash equally, and a sub-expression used twice is one shared object
in a DAG (Algorithm 2 may reuse a generated node as a child several times). The paper's tree
is the DAG unfolded from its root, see :mod:`cellgraph.cell.tree`.

Leaves have a :class:`Role`: ``data`` (``S_data``, e.g. ``x``), ``prev`` (``S_prev``,
states of the previous step, e.g. ``h``, ``c``), ``current`` (a state made earlier in the
same step by a previous run of a multi-state cell, Appendix "Extensions") or ``const``
(``S_aux``: ``zero``, ``one``, unit vectors ``e0``, ``e1``, ...).
"""

from __future__ import annotations

from enum import Enum
from typing import Callable, Iterator

from cellgraph.cell import registry
from cellgraph.errors import CellGraphError

__all__ = ["Role", "Expr", "Leaf", "Node", "IMPLIED_ROLES", "rebuild", "relabel", "substitute", "x", "h", "c", "zero",
           "one"]


class Role(str, Enum):
    """Role of a leaf; the order of the members is the order of Algorithm 2's node list."""

    DATA = "data"
    PREV = "prev"
    CURRENT = "current"
    CONST = "const"

    @property
    def rank(self) -> int:
        return list(Role).index(self)


#: Leaf names whose role need not be given.
IMPLIED_ROLES: dict[str, Role] = {
    "x": Role.DATA,
    "h": Role.PREV,
    "c": Role.PREV,
    "zero": Role.CONST,
    "one": Role.CONST,
}


class Expr:
    """Base of :class:`Leaf` and :class:`Node`: immutable, structural equality and hashing."""

    __slots__ = ("_hash",)

    @property
    def args(self) -> tuple:
        raise NotImplementedError  # pragma: no cover - abstract

    @property
    def func(self) -> type:
        return type(self)

    @property
    def is_leaf(self) -> bool:
        return isinstance(self, Leaf)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        return self._hash == other._hash and self.args == other.args

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __reduce__(self):
        return (self.func, self.args)

    def walk(self) -> Iterator["Expr"]:
        """Every distinct node of the DAG once, children before parents (post-order)."""
        seen: set[Expr] = set()
        stack: list[tuple[Expr, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if node in seen:
                continue
            if expanded or isinstance(node, Leaf):
                seen.add(node)
                yield node
                continue
            stack.append((node, True))
            stack.append((node.right, False))  # type: ignore[attr-defined]
            stack.append((node.left, False))  # type: ignore[attr-defined]

    def leaves(self) -> tuple["Leaf", ...]:
        """Distinct leaves in first-visit (left-to-right post-order) order."""
        return tuple(n for n in self.walk() if isinstance(n, Leaf))

    def internal_nodes(self) -> tuple["Node", ...]:
        """Distinct generated nodes, children before parents."""
        return tuple(n for n in self.walk() if isinstance(n, Node))


class Leaf(Expr):
    """An initial node: ``Leaf("x")``, ``Leaf("h")``, ``Leaf("zero")``, ``Leaf("e3", "const")``."""

    __slots__ = ("name", "role")

    def __init__(self, name: str, role: Role | str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise CellGraphError(f"leaf name must be a non-empty string, got {name!r}")
        if role is None:
            if name not in IMPLIED_ROLES:
                raise CellGraphError(
                    f"leaf {name!r}: a role is required (one of {[r.value for r in Role]}); "
                    f"it is implied only for {sorted(IMPLIED_ROLES)}"
                )
            role = IMPLIED_ROLES[name]
        try:
            role = Role(role)
        except ValueError:
            raise CellGraphError(
                f"leaf {name!r}: unknown role {role!r} (known: {[r.value for r in Role]})"
            ) from None
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "_hash", hash(("Leaf", name, role.value)))

    @property
    def args(self) -> tuple[str, Role]:
        return (self.name, self.role)

    def __repr__(self) -> str:
        if IMPLIED_ROLES.get(self.name) is self.role:
            return f"Leaf({self.name!r})"
        return f"Leaf({self.name!r}, {self.role.value!r})"

    def __str__(self) -> str:
        return self.name


class Node(Expr):
    """A generated node ``u(o(L_r left, R_r right) + b_r)``.

    Args:
        op: name of a registered binary operation (``add``, ``mul``, ...).
        act: name of a registered activation (``sigmoid``, ``tanh``, ``one_minus``,
            ``identity``, ``relu``, ...).
        tuple: index ``r`` of the weight tuple ``(L_r, R_r, b_r)``, 0-based.
        left, right: children; ``left`` is multiplied by ``L_r``, ``right`` by ``R_r``.
    """

    __slots__ = ("op", "act", "tuple", "left", "right", "depth", "size")

    def __init__(self, op: str, act: str, tuple: int, left: Expr, right: Expr) -> None:
        desc = f"Node(op={op!r}, act={act!r}, tuple={tuple!r})"
        try:
            registry.op(op)
            registry.activation(act)
        except CellGraphError as err:
            raise CellGraphError(f"{desc}: {err}") from None
        if isinstance(tuple, bool) or not isinstance(tuple, int) or tuple < 0:
            raise CellGraphError(f"{desc}: tuple index must be an integer >= 0")
        for side, child in (("left", left), ("right", right)):
            if child is None:
                raise CellGraphError(f"{desc}: missing {side} child (a generated node has two)")
            if not isinstance(child, Expr):
                raise CellGraphError(
                    f"{desc}: {side} child must be a Leaf or Node, got {type(child).__name__}"
                )
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "act", act)
        object.__setattr__(self, "tuple", tuple)
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)
        object.__setattr__(self, "depth", 1 + max(_depth(left), _depth(right)))
        object.__setattr__(self, "size", 1 + _size(left) + _size(right))
        object.__setattr__(self, "_hash", hash(("Node", op, act, tuple, left._hash, right._hash)))

    @property
    def args(self) -> tuple[str, str, int, Expr, Expr]:
        return (self.op, self.act, self.tuple, self.left, self.right)

    @property
    def children(self) -> tuple[Expr, Expr]:
        return (self.left, self.right)

    @property
    def commutative(self) -> bool:
        return registry.op(self.op).commutative

    def __repr__(self) -> str:
        return f"Node({self.op!r}, {self.act!r}, {self.tuple}, {self.left!r}, {self.right!r})"

    def __str__(self) -> str:
        return f"{self.act}[{self.op}_{self.tuple}]({self.left}, {self.right})"


def rebuild(root: Expr, make: Callable[[Node, Expr, Expr], Expr]) -> Expr:
    """``root`` rebuilt children first: each node ``n`` becomes ``make(n, left, right)``, its
    operands already rebuilt; leaves stay, and a shared subtree is rebuilt once and still shared."""
    built: dict[Expr, Expr] = {}
    for e in root.walk():
        built[e] = e if isinstance(e, Leaf) else make(e, built[e.left], built[e.right])
    return built[root]


def relabel(root: Expr, label: Callable[[Node], tuple[str, str, int]]) -> Expr:
    """``root`` with every node's ``(op, act, tuple)`` replaced by ``label(node)``: the same
    shape and leaves, a shared subtree still shared."""
    return rebuild(root, lambda n, left, right: Node(*label(n), left, right))


def substitute(root: Expr, old: Expr, new: Expr) -> Expr:
    """``root`` with node ``old`` replaced by ``new`` for every reader (``new`` may read nodes
    of ``root`` that do not depend on ``old``); the other nodes keep their ``(op, act, tuple)``."""
    built: dict[Expr, Expr] = {}
    for e in root.walk():
        if e == old:
            built[e] = new
        elif isinstance(e, Node):
            built[e] = Node(e.op, e.act, e.tuple, built[e.left], built[e.right])
        else:
            built[e] = e
    return built[root]


def _depth(e: Expr) -> int:
    """Height in internal nodes: a leaf has 0."""
    return e.depth if isinstance(e, Node) else 0


def _size(e: Expr) -> int:
    """Number of internal nodes of the unfolded tree."""
    return e.size if isinstance(e, Node) else 0


x = Leaf("x")
h = Leaf("h")
c = Leaf("c")
zero = Leaf("zero")
one = Leaf("one")
