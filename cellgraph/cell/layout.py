"""Parameter layouts and search spaces (paper, Sec. 3.1-3.2 and Appendix "Expressibility").

* :class:`TupleSpec` names one weight tuple ``(L_r, R_r, b_r)``; the identity tuple
  ``(I, I, 0)`` is marked ``identity=True`` and is fixed, not trained (docs/paper-notes.md,
  *Objects: leaves, nodes, tuples*); a matrix of another tuple named ``I`` or ``0`` is the
  identity or zero matrix where a planted teacher or ``model = cell`` with ``fixed_matrices``
  reads the names (:attr:`TupleSpec.fixed_matrices`).
* :class:`Layout` is the ordered list of tuples of a model: a node's ``tuple`` field is an
  index into it.
* :class:`SearchSpace` is the input of one run of Algorithm 2: the tuple indices it may use
  (``L``, ``R``, ``B``), the activations ``U``, the operations ``O``, the leaf groups
  ``S_data``, ``S_prev`` (previous states, then states made earlier in this step),
  ``S_aux`` and the number of iterations ``N_bar`` (``n_iterations``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cellgraph.cell import registry
from cellgraph.cell.expr import Leaf, Role
from cellgraph.errors import CellGraphError

__all__ = ["TupleSpec", "Layout", "SearchSpace", "FIXED_MATRICES"]

#: The display names of fixed matrices: the identity and the zero matrix (docs/FORMAT.md).
FIXED_MATRICES = ("I", "0")


@dataclass(frozen=True)
class TupleSpec:
    """One weight tuple ``(L_r, R_r, b_r)``; ``L``, ``R``, ``b`` are display names."""

    name: str
    L: str = ""
    R: str = ""
    b: str = ""
    identity: bool = False

    @staticmethod
    def identity_tuple(name: str = "id") -> "TupleSpec":
        return TupleSpec(name, "I", "I", "0", identity=True)

    @property
    def fixed_matrices(self) -> dict[str, str]:
        """``{"L" or "R": "I" or "0"}``: the matrices whose display name is one of
        :data:`FIXED_MATRICES` (``torch.nn.GRU``'s ``R`` of ``n``, ``gru_torch``'s fourth tuple, is ``I``)."""
        return {side: name for side, name in (("L", self.L), ("R", self.R)) if name in FIXED_MATRICES}


@dataclass(frozen=True)
class Layout:
    """The ordered weight tuples of a model; node ``tuple`` fields index into ``tuples``."""

    tuples: tuple[TupleSpec, ...]

    def __post_init__(self) -> None:
        names = [t.name for t in self.tuples]
        if len(set(names)) != len(names):
            raise CellGraphError(f"layout tuple names must be distinct, got {names}")

    def __len__(self) -> int:
        return len(self.tuples)

    def index(self, name: str) -> int:
        for i, t in enumerate(self.tuples):
            if t.name == name:
                return i
        raise CellGraphError(f"layout has no tuple {name!r} (has {[t.name for t in self.tuples]})")

    @property
    def identity_indices(self) -> frozenset[int]:
        return frozenset(i for i, t in enumerate(self.tuples) if t.identity)

    @property
    def trainable_indices(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.tuples) if not t.identity)

    def check_index(self, index: int, where: str = "") -> None:
        if not 0 <= index < len(self.tuples):
            raise CellGraphError(
                f"{where}tuple index {index} out of range for a layout of {len(self.tuples)} "
                f"tuples ({', '.join(t.name for t in self.tuples)})"
            )


@dataclass(frozen=True)
class SearchSpace:
    """The sets of one run of Algorithm 2.

    Attributes:
        tuples: indices into the model's :class:`Layout` (``L``, ``R``, ``B``).
        activations: names in ``U``.
        ops: names in ``O``.
        data: ``S_data`` leaves (role ``data``).
        prev: ``S_prev`` leaves (role ``prev``, then ``current`` for states made earlier in
            the same step by a multi-state cell's previous runs).
        aux: ``S_aux`` leaves (role ``const``).
        n_iterations: ``N_bar``, the number of generated nodes.
    """

    tuples: tuple[int, ...]
    activations: tuple[str, ...]
    ops: tuple[str, ...]
    data: tuple[Leaf, ...]
    prev: tuple[Leaf, ...]
    aux: tuple[Leaf, ...]
    n_iterations: int

    def __post_init__(self) -> None:
        for a in self.activations:
            registry.activation(a)
        for o in self.ops:
            registry.op(o)
        if not self.tuples or not self.activations or not self.ops:
            raise CellGraphError("a search space needs at least one tuple, activation and op")
        if self.n_iterations < 1:
            raise CellGraphError(f"n_iterations must be >= 1, got {self.n_iterations}")
        allowed = {"data": {Role.DATA}, "prev": {Role.PREV, Role.CURRENT}, "aux": {Role.CONST}}
        for group, roles in allowed.items():
            for leaf in getattr(self, group):
                if leaf.role not in roles:
                    raise CellGraphError(
                        f"leaf {leaf.name!r} has role {leaf.role.value!r}, not allowed in {group}"
                    )
        leaves = self.leaves
        if len(set(leaves)) != len(leaves):
            raise CellGraphError(f"leaves must be distinct, got {[str(l) for l in leaves]}")

    @property
    def leaves(self) -> tuple[Leaf, ...]:
        """Algorithm 2's initial node order: ``S_data``, ``S_prev``, ``S_aux``."""
        return self.data + self.prev + self.aux

    def check(self, layout: Layout) -> None:
        for r in self.tuples:
            layout.check_index(r, "search space: ")
