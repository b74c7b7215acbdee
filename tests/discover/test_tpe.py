"""The TPE strategy: it learns from full-fidelity losses, keeps no state, and runs in the search,
which records its draws as the trials' parameters, reuses duplicates and resumes."""

import json
import random
from collections import Counter

import optuna
import pytest

from cellgraph.cell.expr import Node, h, x
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.search import discover
from cellgraph.discover.slots import SlotEncoding
from cellgraph.discover.space import CellSpace
from cellgraph.discover.storage import open_search_storage
from cellgraph.discover.strategies import Record, TPESearch
from cellgraph.discover.synthetic import StructureEvaluator
from cellgraph.errors import CellGraphError
from tests.discover.cells import gru, no_op, small
from tests.discover.worker import SMALL

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _history(space: CellSpace) -> list[Record]:
    """Two-node cells ``u(W[f, h])``, ``f`` a random gate: a root on tanh reached full fidelity at
    loss 0.1, one on sigmoid was stopped at a lower rung at loss 0.0, the others reached full
    fidelity at loss 1."""
    encoding, rng, history = SlotEncoding(space), random.Random(0), []
    for k in range(40):
        act = space.activations[k % len(space.activations)]
        root = Node("add", act, 2, Node(rng.choice(space.ops), rng.choice(("sigmoid", "tanh")), 1, x, h), h)
        loss = {"tanh": 0.1, "sigmoid": 0.0}.get(act, 1.0)
        history.append(Record(k, root, cell_hash(root), loss, act != "sigmoid", encoding.encode(root)))
    return history


def test_tpe_proposes_what_reached_full_fidelity_at_a_low_loss_not_what_was_stopped_early():
    space = CellSpace(max_nodes=4)
    history = _history(space)
    roots = Counter(TPESearch(starts=1).propose(history, space, random.Random(s), Counter()).root.act
                    for s in range(20))
    assert roots["tanh"] > 10 and roots["sigmoid"] < 5, roots  # uniform draws: 5 each


def test_tpe_keeps_no_state_and_starts_with_uniform_draws():
    space = CellSpace(max_nodes=4)
    history, strategy = _history(space), TPESearch(starts=41)
    first, again = (strategy.propose(history, space, random.Random(3), Counter()) for _ in range(2))
    assert first.params == again.params and first.root == again.root and first.origin == "random"
    modelled = TPESearch(starts=40).propose(history, space, random.Random(3), Counter())
    assert modelled.origin == "tpe" and SlotEncoding(space).decode(modelled.params).root == modelled.root
    assert set(modelled.params) <= set(modelled.distributions)
    with pytest.raises(CellGraphError, match="starts must be >= 1"):
        TPESearch(starts=0)


def test_seed_cells_are_proposed_first_as_their_encoding_and_must_be_candidates():
    space = CellSpace()
    proposal = TPESearch(seeds=(gru(),)).propose([], space, random.Random(0), Counter())
    assert proposal.origin == "seed" and proposal.root == gru()
    assert proposal.params == SlotEncoding(space).encode(gru())
    with pytest.raises(CellGraphError, match="tpe: seed cell 0 is not a candidate"):
        TPESearch(seeds=(no_op(),)).check(space)


class Counting(StructureEvaluator):
    """Counts evaluations per hash in a counter that outlives it (``calls``)."""

    def __init__(self, target, calls: Counter) -> None:
        super().__init__(target)
        self.calls = calls


class Watched(TPESearch):
    """Keeps the last history it was given (in ``seen``, a list given to it)."""

    def __init__(self, seen: list, **kwargs) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "seen", seen)

    def propose(self, history, space, rng, rejected):
        self.seen[:] = history
        return super().propose(history, space, rng, rejected)


def test_a_tpe_search_records_its_draws_reuses_duplicates_and_counts_invalid_draws(tmp_path):
    calls, storage, seen = Counter(), f"journal:{tmp_path / 'study.log'}", []  # SQLite: slower, a write a parameter
    result = discover(SMALL, Counting(small(), calls), Watched(seen, starts=5), 20, seed=0, run_dir=tmp_path,
                      storage=storage, show_progress=False)
    assert result.evaluations == 20 and result.trained == 20 and max(calls.values()) == 1
    assert result.duplicates > 0 and sum(result.rejected.values()) > 0  # invalid draws train nothing
    assert json.loads((tmp_path / "discover.json").read_text())["strategy"] == {"name": "tpe", "starts": 5, "seeds": 0}
    study = optuna.load_study(study_name="discover", storage=open_search_storage(storage))
    trials, encoding = study.get_trials(), SlotEncoding(SMALL)
    assert all(cell_hash(encoding.decode(t.params).root) == t.user_attrs["hash"] for t in trials)
    assert len(seen) > 20 and all(r.params == trials[r.number].params for r in seen)  # what the sampler learns from
    assert [t.user_attrs["origin"] for t in trials[:5]] == ["random"] * 5
    assert {t.user_attrs["origin"] for t in trials[5:]} == {"tpe"}
    for t in trials:
        if "duplicate_of" in t.user_attrs:  # TPE's history sees the loss its draw reused
            assert t.state.name == "COMPLETE" and t.value == trials[t.user_attrs["duplicate_of"]].value


def test_a_stopped_tpe_search_goes_on_from_its_study_without_training_again(tmp_path):
    storage, calls = f"journal:{tmp_path / 'study.log'}", Counter()
    discover(SMALL, Counting(small(), calls), TPESearch(starts=5), 8, storage=storage, show_progress=False)
    before = len(optuna.load_study(study_name="discover", storage=open_search_storage(storage)).get_trials())
    result = discover(SMALL, Counting(small(), calls), TPESearch(starts=5), 16, storage=storage,
                      show_progress=False)
    assert result.evaluations == 16 and sum(calls.values()) == 16 and max(calls.values()) == 1
    resumed = optuna.load_study(study_name="discover", storage=open_search_storage(storage)).get_trials()[before]
    assert resumed.user_attrs["origin"] == "tpe" and resumed.params  # modelled at once from the stored draws
