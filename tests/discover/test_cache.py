"""The canonical cache (cellgraph.discover.cache): hashes up to isomorphism, the JSON round
trip, and which evaluation of a hash the cache keeps."""

import math

import pytest

from cellgraph.cell.expr import Node, h, x
from cellgraph.discover.cache import Entry, ResultCache, cell_form, cell_from_json, cell_hash, cell_json
from tests.discover.cells import gru, small


def test_swapped_commutative_operands_and_renumbered_tuples_share_a_hash():
    f = Node("add", "sigmoid", 1, x, h)
    swapped = Node("add", "sigmoid", 1, h, x)
    renumbered = Node("add", "sigmoid", 7, x, h)
    assert cell_hash(f) == cell_hash(swapped) == cell_hash(renumbered)
    assert cell_form(f) == cell_form(swapped)
    assert cell_hash(f) != cell_hash(Node("add", "tanh", 1, x, h))       # another activation
    assert cell_hash(f) != cell_hash(Node("mul", "sigmoid", 1, x, h))    # another op
    assert cell_hash(f) != cell_hash(Node("add", "sigmoid", 0, x, h))    # the identity tuple


def test_cell_hash_is_the_sha256_hex_of_the_form():
    import hashlib
    assert cell_hash(small()) == hashlib.sha256(cell_form(small()).encode("utf-8")).hexdigest()
    assert len(cell_hash(small())) == 64


@pytest.mark.parametrize("root", [gru(), small()], ids=["gru", "small"])
def test_json_round_trip_keeps_the_cell(root):
    document = cell_json(root)
    assert document["format"].startswith("cellgraph")
    assert cell_hash(cell_from_json(document)) == cell_hash(root)


def _cache(*entries):
    return ResultCache(entries)


def test_the_cache_keeps_finished_before_running_then_complete_then_lower_loss():
    running = Entry(1, running=True)
    stopped = Entry(2, running=False, loss=0.1, complete=False)
    full = Entry(3, running=False, loss=0.5, complete=True)
    better = Entry(4, running=False, loss=0.2, complete=True)
    failed = Entry(5, running=False, loss=None, complete=True)
    for order in ([running, stopped, full, better, failed], [failed, better, full, stopped, running]):
        cache = _cache(*(("k", e) for e in order))
        assert cache.lookup("k") == better
    assert _cache(("k", running), ("k", stopped)).lookup("k") == stopped
    assert _cache(("k", stopped), ("k", running)).lookup("k") == stopped
    assert _cache(("k", running), ("k", failed)).lookup("k") == failed   # finished, even failed
    assert _cache(("k", failed), ("k", full)).lookup("k") == full         # a loss beats none


def test_equal_results_keep_the_earlier_trial():
    a, b = Entry(3, running=False, loss=0.5, complete=True), Entry(8, running=False, loss=0.5, complete=True)
    assert _cache(("k", b), ("k", a)).lookup("k") == a
    assert _cache(("k", a), ("k", b)).lookup("k") == a


def test_lookups_count_hits_and_the_duplicate_rate():
    cache = ResultCache()
    assert cache.duplicate_rate == 0.0 and len(cache) == 0 and "k" not in cache
    assert cache.lookup("k") is None
    cache.add("k", Entry(0, running=True))
    cache.add("j", Entry(1, running=False, loss=1.0, complete=True))
    assert cache.lookup("k") == Entry(0, running=True)
    assert cache.lookup("k") is not None
    assert (cache.lookups, cache.hits) == (3, 2)
    assert math.isclose(cache.duplicate_rate, 2 / 3)
    assert len(cache) == 2 and "k" in cache and "j" in cache and "i" not in cache
