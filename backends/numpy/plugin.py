"""The float64 numpy reference backend (entry point ``numpy`` of ``cellgraph.backends``).

* evaluation of cells, ``c = u(o(L_r c_i, R_r c_j) + b_r)`` per node
  (:mod:`cellgraph.backends.numpy.eval`);
* Algorithm 2 written literally for one sample (:mod:`cellgraph.backends.numpy.search`);
* the paper's scoring network ``alpha(v) = w2 . tanh(W1 v + b1) + b2`` (:func:`mlp_alpha`).

Get it with ``cellgraph.backend("numpy")``; :data:`backend` is the object the entry point names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cellgraph.backends.numpy.eval import Params, evaluate, evaluate_cell, mlp_alpha
from cellgraph.backends.numpy.search import SearchResult, search, search_cell

__all__ = [
    "Params",
    "SearchResult",
    "NumpyBackend",
    "backend",
    "evaluate",
    "evaluate_cell",
    "mlp_alpha",
    "search",
    "search_cell",
]


@dataclass(frozen=True)
class NumpyBackend:
    """The numpy backend's functions under one name (a :class:`cellgraph.backend.SearchBackend`)."""

    name: str
    evaluate: Callable
    evaluate_cell: Callable
    search: Callable
    search_cell: Callable
    mlp_alpha: Callable


backend = NumpyBackend("numpy", evaluate, evaluate_cell, search, search_cell, mlp_alpha)
