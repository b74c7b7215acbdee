import random

import pytest

from cellgraph.discover.cache import cell_hash
from cellgraph.discover.identify import contenders, identify
from cellgraph.discover.mutations import mutate, neighbours
from cellgraph.discover.space import CellSpace, complexity, from_cell, validate
from cellgraph.discover.synthetic import StructureEvaluator
from cellgraph.errors import CellGraphError
from cellgraph.targets import target
from tests.discover.cells import gru, small

SPACE = CellSpace()
SETTINGS = {"evaluator": "structure"}


def mgu():
    t = target("mgu")
    return from_cell(t.cell, t.layout)


def test_complexity_counts_generated_nodes_and_trainable_matrices():
    assert complexity(mgu()) == 7 + 2 * 2 and complexity(gru()) == 8 + 3 * 2 and complexity(small()) == 4 + 2 * 2
    mut1 = target("mut1")  # z = sigmoid(W_z x + R_z 0 + b_z): R_z multiplies zero and is not counted
    assert complexity(from_cell(mut1.cell, mut1.layout)) == 9 + 2 + 2 + 1


@pytest.mark.parametrize("root", [mgu(), gru(), small()], ids=["mgu", "gru", "small"])
def test_neighbours_are_valid_distinct_and_every_single_change_mutate_makes(root):
    found = neighbours(root, SPACE)
    keys = [cell_hash(child) for _, child in found]
    assert len(set(keys)) == len(keys) and cell_hash(root) not in keys
    assert all(validate(child, SPACE) is None for _, child in found)
    assert neighbours(root, SPACE) == found  # deterministic
    rng, made = random.Random(0), set()
    for _ in range(400):
        m = mutate(root, rng, SPACE)
        if m.child is not None and m.name != "insert":
            made.add(cell_hash(m.child))
    assert made and made <= set(keys)  # fails if neighbours misses a kind of change


def test_neighbour_names_say_the_change():
    names = [name for name, _ in neighbours(small(), SPACE)]
    assert "op n0 add->mul" in names and any(n.startswith("rewire n3 right") for n in names)
    assert any(n.startswith("remove ") for n in names) and any(n.startswith("kind ") for n in names)


def test_contenders_put_the_teacher_and_gru_first_and_a_larger_limit_extends_a_smaller_one():
    few, more = contenders(mgu(), gru(), SPACE, 3, seed=1), contenders(mgu(), gru(), SPACE, 6, seed=1)
    assert [n for n, _ in few[:2]] == ["teacher", "gru"] and len(few) == 5 and more[:5] == few
    assert [n for n, _ in contenders(gru(), gru(), SPACE, 0)] == ["teacher"]


class Counting(StructureEvaluator):
    def evaluate(self, cell, layout, epochs, seed):
        self.last_details = {"complexity": complexity(from_cell(cell, layout))}
        return super().evaluate(cell, layout, epochs, seed)


def test_the_teacher_passes_when_the_objective_singles_it_out_and_a_rerun_skips_what_is_done(tmp_path):
    path = tmp_path / "identify.json"
    first = identify(mgu(), gru(), SPACE, Counting(mgu(), noise=0.0), 1, 0, path, SETTINGS, limit=4, show_progress=False)
    assert first.passed and first.teacher.objective == 0 and first.best_other is not None
    assert first.teacher.details == {"complexity": 11} and first.row("gru").objective > 0
    again = Counting(mgu(), noise=0.0)
    second = identify(mgu(), gru(), SPACE, again, 1, 0, path, SETTINGS, limit=6, show_progress=False)
    assert sum(again.calls.values()) == 2 and second.rows[:6] == first.rows  # only the two new neighbours
    with pytest.raises(CellGraphError, match="other settings"):
        identify(mgu(), gru(), SPACE, again, 1, 0, path, {"evaluator": "other"}, show_progress=False)


def test_a_teacher_that_a_neighbour_beats_fails(tmp_path):
    name, rival = neighbours(mgu(), SPACE)[0]
    found = identify(mgu(), gru(), SPACE, StructureEvaluator(rival, noise=0.0), 1, 0, tmp_path / "i.json", SETTINGS,
                     show_progress=False)
    assert not found.passed and found.best_other.name == name and found.gap < 0


class Rescoring(Counting):
    """An evaluator whose objective is a function of its details, so a stored row can be rescored."""

    def __init__(self, *args, weight=1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.weight = weight

    def evaluate(self, cell, layout, epochs, seed):
        loss = super().evaluate(cell, layout, epochs, seed)
        self.last_details["loss"] = loss
        return self.objective(self.last_details)

    def objective(self, details):
        return details["loss"] + self.weight * details["complexity"]


def test_a_rerun_that_only_changes_the_penalty_rescores_the_rows_without_training(tmp_path):
    path = tmp_path / "identify.json"
    first = identify(mgu(), gru(), SPACE, Rescoring(mgu(), noise=0.0, weight=0.0), 1, 0, path,
                     {**SETTINGS, "parsimony": 0.0}, limit=4, show_progress=False)
    again = Rescoring(mgu(), noise=0.0, weight=1.0)
    second = identify(mgu(), gru(), SPACE, again, 1, 0, path, {**SETTINGS, "parsimony": 1.0}, limit=4,
                      show_progress=False)
    assert sum(again.calls.values()) == 0
    assert [r.objective for r in second.rows] == [r.objective + r.details["complexity"] for r in first.rows]
    with pytest.raises(CellGraphError, match="other settings"):  # an evaluator that cannot rescore is refused
        identify(mgu(), gru(), SPACE, Counting(mgu(), noise=0.0), 1, 0, path, {**SETTINGS, "parsimony": 2.0},
                 show_progress=False)


def test_the_penalties_charge_complexity_relatively_or_absolutely():
    import math

    from cellgraph.discover.evaluator import penalised

    assert penalised(0.02, 10, 0.1) == pytest.approx(0.02 * math.e)
    assert penalised(0.02, 10, 1e-3, "absolute") == pytest.approx(0.03)
    with pytest.raises(CellGraphError, match="unknown penalty 'bic'"):
        penalised(0.02, 10, 0.1, "bic")


def test_errors_below_the_floor_count_as_equal_so_complexity_decides():
    import math

    from cellgraph.discover.evaluator import penalised

    assert penalised(0.02, 10, 0.1, floor=1e-5) == penalised(0.02, 10, 0.1)  # above it: the error itself
    assert penalised(4e-7, 11, 0.1, floor=1e-5) == pytest.approx(1e-5 * math.exp(1.1))
    assert penalised(9e-7, 10, 0.1, floor=1e-5) < penalised(4e-7, 11, 0.1, floor=1e-5)  # the simpler twin wins
    assert penalised(9e-7, 10, 0.1) > penalised(4e-7, 11, 0.1)  # without the floor, the optimiser's noise does
    assert penalised(4e-7, 10, 1e-3, "absolute", floor=1e-5) == pytest.approx(1e-5 + 1e-2)


def test_a_rerun_that_only_adds_an_error_floor_rescores_the_rows_without_training(tmp_path):
    path = tmp_path / "identify.json"
    identify(mgu(), gru(), SPACE, Rescoring(mgu(), noise=0.0), 1, 0, path, SETTINGS, limit=4, show_progress=False)
    again = Rescoring(mgu(), noise=0.0)
    identify(mgu(), gru(), SPACE, again, 1, 0, path, {**SETTINGS, "floor": 1e-5}, limit=4, show_progress=False)
    assert sum(again.calls.values()) == 0
