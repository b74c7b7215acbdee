"""The slot encoding: targets round-trip, every parameter set decodes to a candidate or a reason."""

import random
import re

import pytest

from cellgraph.discover.cache import cell_hash
from cellgraph.discover.slots import FIELDS, NODES, SlotEncoding
from cellgraph.discover.space import CellSpace, from_cell, validate
from cellgraph.errors import CellGraphError
from cellgraph.targets import target
from tests.discover.cells import no_op

#: The words of every reason :func:`cellgraph.discover.space.validate` gives.
REASONS = {"the root is a leaf", "leaf outside the space", "does not read every data and state leaf", "too few nodes",
           "too many nodes", "op outside the space", "activation outside the space", "tuple kind outside the space",
           "node of constants only", "product with zero (a constant)", "no-op node (identity add of zero)",
           "duplicate identity subexpression"}


@pytest.mark.parametrize("name", ["gru", "mgu", "mut1", "mut3", "rnn"])
def test_a_target_encodes_into_one_slot_per_node_and_decodes_back(name):
    t = target(name)
    root = from_cell(t.cell, t.layout)
    encoding = SlotEncoding(CellSpace())
    params = encoding.encode(root)
    n = len(root.internal_nodes())
    assert params[NODES] == n and len(params) == 1 + len(FIELDS) * n
    assert all(encoding.distributions[k]._contains(encoding.distributions[k].to_internal_repr(v))
               for k, v in params.items())
    decoded = encoding.decode(params)
    assert decoded.reason is None and decoded.root == root and cell_hash(decoded.root) == cell_hash(root)


def test_every_parameter_set_decodes_to_a_candidate_or_a_counted_reason():
    """Uniform draws of every parameter (the unused slots' too, which decoding must ignore)."""
    space = CellSpace(max_nodes=6)
    encoding, rng = SlotEncoding(space), random.Random(0)
    found: dict[str, int] = {}
    for _ in range(500):
        params = {name: rng.choice(d.choices) for name, d in encoding.distributions.items()}
        decoded = encoding.decode(params)
        if decoded.root is None:
            assert decoded.reason in REASONS
            found[decoded.reason] = found.get(decoded.reason, 0) + 1
            continue
        assert validate(decoded.root, space) is None and len(decoded.root.internal_nodes()) <= params[NODES]
        again = encoding.decode(encoding.encode(decoded.root))
        assert again.root == decoded.root
        found["valid"] = found.get("valid", 0) + 1
    assert found["valid"] > 50 and len(found) > 3, found


def test_slot_operands_are_leaves_and_earlier_slots_and_the_space_sets_the_choices():
    space = CellSpace(ops=("add",), kinds=("W",), min_nodes=2, max_nodes=3)
    d = SlotEncoding(space).distributions
    assert d[NODES].choices == (2, 3) and d["n0.op"].choices == ("add",) and d["n1.kind"].choices == ("W",)
    assert d["n0.left"].choices == ("x", "h", "zero") and d["n2.right"].choices == ("x", "h", "zero", "n0", "n1")
    assert "n3.op" not in d


def test_a_cell_outside_the_space_is_refused_with_its_reason():
    with pytest.raises(CellGraphError, match=re.escape("no-op node (identity add of zero)")):
        SlotEncoding(CellSpace()).encode(no_op())
    gru = target("gru")
    with pytest.raises(CellGraphError, match="too many nodes"):
        SlotEncoding(CellSpace(max_nodes=4)).encode(from_cell(gru.cell, gru.layout))
