"""Iso(T) edge cases that the class tests in test_canonical.py do not reach: the size guard's
boundary and swaps applied to a tree that is already swapped (its edges carried along)."""

from __future__ import annotations

import pytest

from cellgraph.algorithms.isomorphism import apply_swaps, iso_class, iso_class_size, iso_swaps
from cellgraph.cell.expr import Node, h, x
from cellgraph.cell.tree import SWAPPED, unfold
from cellgraph.errors import CellGraphError

# add(add(x, h), h): |Iso| = 2 (inner x != h) * 2 (outer operands differ) = 4
TREE = unfold(Node("add", "tanh", 0, Node("add", "tanh", 1, x, h), h))


def test_a_class_of_exactly_max_size_is_enumerated():
    assert iso_class_size(TREE) == 4
    assert len(iso_swaps(TREE, max_size=4)) == len(iso_class(TREE, max_size=4)) == 4
    with pytest.raises(CellGraphError, match=r"^Iso\(T\) of the tree rooted at .* has 4 members, more than "
                                             r"max_size=3; pass a larger max_size or use a smaller target tree$"):
        iso_swaps(TREE, max_size=3)


def test_swaps_apply_to_an_already_swapped_tree():
    """Swapping a position twice gives the tree back; the rebuilt positions keep the edges
    they had (a swapped position stays swapped unless swapped again)."""
    swapped = apply_swaps(TREE, {1, 2})
    assert swapped.edges == SWAPPED and swapped.children[1].edges == SWAPPED
    # heap labels are those of the current order: the inner node is now label 3
    assert apply_swaps(swapped, {1, 3}).ordered_key() == TREE.ordered_key()
    again = apply_swaps(swapped, {3})
    assert again.edges == SWAPPED and again.children[1].edges == ("L", "R")
