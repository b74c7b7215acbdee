"""A screen at initialisation: candidates judged on random weights, before any training
(docs/discover.md, *The screen*).

Zero-cost proxies score an architecture at initialisation instead of training it (J. Mellor,
J. Turner, A. Storkey, E. J. Crowley, "Neural Architecture Search without Training", ICML 2021;
M. S. Abdelfattah, A. Mehrotra, L. Dudziak, N. D. Lane, "Zero-Cost Proxies for Lightweight NAS",
ICLR 2021). The screen is a zero-cost filter of that kind for recurrent cells, a check of how a
signal propagates through time at initialisation: a candidate is kept when, on at least one of
``draws`` random draws of its tuples, :func:`cellgraph.data.minimal.conditioning_problem` finds
its states bounded and its input neither ignored (``deaf``), nor amplified over the steps
(``chaotic``), nor forgotten within them (``forgetful``).

The probe's inputs and tuples (:data:`cellgraph.data.planted.PROBE`: 64 sequences of 10 steps,
``p = 8``, weight scale 1, bias scale 0.1) are drawn from the candidate's hash, so a cell's
verdict is a function of its structure alone: every search, seed and worker screens alike.

With ``ablations`` a candidate must also pass :func:`~cellgraph.data.minimal.minimality_problem`
on the same draw (no node removable, bypassable, constant or linear on those weights): the
planted teachers' whole filter. ``benchmarks/screen.py`` measures both; the search uses the first,
since the ablations refuse the GRU, MGU and MUT1-3, whose gates barely act at initialisation.

The tanh RNN, the GRU, MGU and MUT1-3 pass; 282 of the 1,632 cells of one and two nodes do. The
``minimal:SEED`` planted teachers were drawn through this same check on their own weights, so on
them the screen is knowledge of how the teachers were made, as the motif moves are of how gated
cells are built.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from cellgraph.cell.expr import Expr
from cellgraph.data.minimal import conditioning_problem, minimal_problem
from cellgraph.data.planted import PROBE, Probe, teacher_tuples
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.space import to_cell
from cellgraph.errors import CellGraphError

__all__ = ["Screen"]


@dataclass(frozen=True)
class Screen:
    """Keep a candidate when it passes :func:`~cellgraph.data.minimal.conditioning_problem` on
    at least one of ``draws`` draws of ``probe``, and with ``ablations`` also
    :func:`~cellgraph.data.minimal.minimality_problem` (module docstring)."""

    draws: int = 3
    probe: Probe = PROBE
    ablations: bool = False

    def __post_init__(self) -> None:
        if self.draws < 1:
            raise CellGraphError(f"screen: draws must be >= 1, got {self.draws}")

    def problem(self, root: Expr) -> str | None:
        """``None`` when ``root`` passes; else the kind of its first draw's problem
        (``unbounded``, ``deaf``, ``chaotic`` or ``forgetful``; with ``ablations`` also
        ``remove``, ``drop``, ``constant`` or ``linear``)."""
        return _problem(root, self.draws, self.probe, self.ablations)

    def to_dict(self) -> dict:
        return {"draws": self.draws, **({"ablations": True} if self.ablations else {})}


@functools.lru_cache(maxsize=1 << 16)
def _problem(root: Expr, draws: int, probe: Probe, ablations: bool) -> str | None:
    """:meth:`Screen.problem`, kept: local search screens a centre's neighbours at every proposal."""
    cell, layout = to_cell(root)
    rng = np.random.default_rng(int(cell_hash(root), 16) % 2**64)
    first = None
    for _ in range(draws):
        inputs = rng.standard_normal((probe.sequences, probe.steps, probe.p))
        params = teacher_tuples(rng, probe.p, probe.weight_scale, probe.bias_scale, layout)
        problem = (minimal_problem(cell.output.root, params, inputs, layout.identity_indices) if ablations
                   else conditioning_problem(cell.output.root, params, inputs))
        if problem is None:
            return None
        first = first or problem.partition(":")[0]
    return first
