"""The discrete cell search: candidates, mutations, strategies, fidelities and the search loop
(docs/discover.md). Torch-free: candidates are trained by an evaluator given to the search."""

from cellgraph.discover.cache import ResultCache, cell_form, cell_hash, cell_json, cell_from_json
from cellgraph.discover.evaluator import Evaluator
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.mutations import MUTATIONS, Mutation, mutate
from cellgraph.discover.screen import Screen
from cellgraph.discover.search import Discovery, Found, TargetHit, discover
from cellgraph.discover.slots import SlotEncoding
from cellgraph.discover.space import CellSpace, from_cell, sample_cell, to_cell, validate
from cellgraph.discover.strategies import (EnumerationSearch, LocalSearch, Proposal, RandomSearch, Record,
                                           RegularizedEvolution, Strategy, TPESearch)

__all__ = ["CellSpace", "validate", "sample_cell", "to_cell", "from_cell", "MUTATIONS", "Mutation", "mutate",
           "cell_form", "cell_hash", "cell_json", "cell_from_json", "ResultCache", "Evaluator", "Fidelity",
           "Record", "Proposal", "Strategy", "RandomSearch", "RegularizedEvolution", "LocalSearch", "EnumerationSearch",
           "TPESearch", "Screen", "SlotEncoding", "Discovery", "Found", "TargetHit", "discover"]
