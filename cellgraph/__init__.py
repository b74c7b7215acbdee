"""cellgraph: a symbolic cell-search engine for Recursive-Recurrent Neural Networks.

The core (this package) never imports torch: it holds typed cell DAGs, their unfolded
trees, canonical forms, the paper's tree distances, the GRU/LSTM targets and the exports.
Numeric evaluation lives in backends found by name (:func:`cellgraph.backend`);
:func:`cellgraph.load_run` loads a trained run folder through one.
"""

from cellgraph.backend import backend, backend_names
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, SearchSpace, TupleSpec
from cellgraph.cell.registry import Activation, Op, register_activation, register_op
from cellgraph.cell.tree import Tree, unfold
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.runs import load_run
from cellgraph.targets import Target, target, target_names

__version__ = "0.1.0"

__all__ = [
    "CellGraphError", "FormatError", "Expr", "Leaf", "Node", "Role", "CellGraph", "MultiCell",
    "Layout", "SearchSpace", "TupleSpec", "Activation", "Op", "register_activation",
    "register_op", "Target", "target", "target_names", "Tree", "unfold", "load_run", "__version__",
]
