"""The discovery recipe: the straight-through estimator, the structural term, exclusion by
slot and the warm start from a trained GRU (docs/paper-notes.md, *Extension: the discovery
recipe*)."""

from __future__ import annotations

import json

import pytest
import torch

from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU
from cellgraph.backends.torch.algorithm2.search import prepare, search
from cellgraph.backends.torch.algorithm2.logits import n_slots, slot
from cellgraph.backends.torch.training.task import TaskModel
from cellgraph.backends.torch.training.checkpoint import load_checkpoint
from cellgraph.backends.torch.runs.train import train
from cellgraph.backends.torch.models.warmstart import teacher_logit, warm_start
from cellgraph.cell.expr import h, x, zero
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.config import TrainConfig

P, V = 6, 9  # hidden size, vocabulary


def _teacher(seed: int = 0) -> TaskModel:
    torch.manual_seed(seed)
    return TaskModel(TrainConfig(model="gru", hidden_size=P), V, V, True).double()


def _student(model: str, mode: str, exclusion: str = "slot", **changes) -> TaskModel:
    config = TrainConfig(model=model, hidden_size=P, scoring_hidden=5, n_tuples=4, mode=mode,
                         structure_term=True, exclusion=exclusion, tree="gru_torch", **changes)
    return TaskModel(config, V, V, True, states=("h",)).double()


@pytest.mark.parametrize("mode", ["hard", "straight-through"])
@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_a_warm_start_computes_the_teacher_gru_exactly(model, mode):
    """At training step 0 the warm-started model is the teacher: the same logits at every
    step of every sequence, the first step (h_0 = 0) included."""
    teacher, student = _teacher(), _student(model, mode)
    warm_start(student, teacher, 0.9)
    tokens = torch.randint(0, V, (5, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, _ = teacher(tokens)
    got, traces = student(tokens)
    assert (got - want).abs().max().item() < 1e-6
    cells = {str(student.cell(traces, t, b)) for t in range(12) for b in range(5)}
    assert len(cells) == 1  # one cell, the teacher's, for every sample and step


def test_exclusion_by_value_cannot_build_the_gru_at_the_first_step():
    """Why the warm start needs exclusion by slot: with h_0 = 0 the GRU's h_1 = (1 - z) n equals
    its own node (1 - z) * n, so the paper's exclusion by value forbids it."""
    teacher, student = _teacher(), _student("rrnn", "hard", exclusion="value")
    warm_start(student, teacher, 0.9)
    tokens = torch.randint(0, V, (3, 4), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want, _ = teacher(tokens)
        got, _ = student(tokens)
    assert (got[:, 0] - want[:, 0]).abs().max().item() > 1e-3


def test_the_teacher_logit_gives_the_teacher_its_share_of_the_mixture():
    for weight, n in ((0.9, 5), (0.5, 2), (0.99, 8760)):
        a = teacher_logit(weight, n)
        assert abs(torch.softmax(torch.tensor([a] + [0.0] * (n - 1), dtype=torch.float64), 0)[0].item() - weight) < 1e-12
    with pytest.raises(CellGraphError, match="between 0 and 1"):
        teacher_logit(1.0, 3)


def _space(n_iterations: int = 3) -> SearchSpace:
    return SearchSpace((0, 1), ("tanh", "identity"), ("add", "mul"), (x,), (h,), (zero,), n_iterations)


def _search(space: SearchSpace, logits, exclusion: str = "value", seed: int = 0, B: int = 4):
    """Algorithm 2 (hard) on random weights; tuple 1 is the identity ``(I, I, 0)``."""
    g = torch.Generator().manual_seed(seed)
    p = 5
    L, R, b = torch.randn(2, p, p, generator=g), torch.randn(2, p, p, generator=g), torch.randn(2, p, generator=g)
    L[1], R[1], b[1] = torch.eye(p), torch.eye(p), 0.0
    W1, b1, w2 = torch.randn(7, p, generator=g), torch.randn(7, generator=g), torch.randn(7, generator=g)
    leaves = torch.randn(B, 3, p, generator=g)
    leaves[:, 2] = 0.0
    params = prepare(space, L, R, b, W1, b1, w2, torch.tensor(0.0), structure=logits, exclusion=exclusion)
    return search(params, leaves, "hard")


def test_zero_structural_logits_are_the_papers_score():
    space = _space()
    plain = _search(space, None)
    zeros = _search(space, torch.zeros(space.n_iterations, n_slots(space)))
    for name in ("left", "right", "tuple_pos", "op_pos", "act_pos", "best_score"):
        assert torch.equal(getattr(plain, name), getattr(zeros, name))


def test_a_structural_logit_chooses_its_slot_at_its_iteration():
    """A large logit on a slot at iteration k makes it c_k*, for every sample, and the slot is
    the one the trace decodes (so :func:`slot` numbers slots as the search keys them)."""
    space = _space()
    wanted = [(1, "mul", "identity", 0, 1), (0, "add", "tanh", 1, 3), (1, "add", "identity", 0, 4)]
    logits = torch.zeros(space.n_iterations, n_slots(space))
    for k, (r, o, u, i, j) in enumerate(wanted):
        logits[k, slot(space, r, o, u, i, j)] = 1e4
    trace = _search(space, logits)
    for k, (r, o, u, i, j) in enumerate(wanted):
        assert (trace.tuple_pos[:, k] == space.tuples.index(r)).all()
        assert (trace.op_pos[:, k] == space.ops.index(o)).all()
        assert (trace.act_pos[:, k] == space.activations.index(u)).all()
        assert (trace.left[:, k] == i).all() and (trace.right[:, k] == j).all()
    with pytest.raises(CellGraphError, match="0 <= i < j"):
        slot(space, 0, "add", "tanh", 2, 2)


def test_exclusion_by_slot_excludes_the_chosen_candidate_only():
    """``id(I x + I 0 + 0) = x`` rebuilds a leaf's vector (allowed either way); ``id(I c_1 + I 0)``
    rebuilds c_1's: the paper's exclusion by value forbids it, exclusion by slot allows it,
    and forbids choosing c_1's own slot again."""
    space = SearchSpace((0, 1), ("identity",), ("add",), (x,), (h,), (zero,), 3)
    first, again = slot(space, 0, "add", "identity", 0, 1), slot(space, 1, "add", "identity", 2, 3)
    logits = torch.zeros(3, n_slots(space))
    logits[0, first] = 1e4
    logits[1, again] = 1e4  # c_2 = I c_1 + I 0 + 0 = c_1
    logits[2, first] = 1e4  # c_1's slot once more
    by_value = _search(space, logits, "value")
    by_slot = _search(space, logits, "slot")

    def rebuilt(trace):  # c_2 = id(I 0 + I c_1 + 0), the identity tuple on the zero leaf and c_1
        return (trace.left[:, 1] == 2) & (trace.right[:, 1] == 3) & (trace.tuple_pos[:, 1] == 1)

    assert not rebuilt(by_value).any()
    assert rebuilt(by_slot).all()
    assert torch.allclose(by_slot.vectors[:, 4], by_slot.vectors[:, 3])
    assert not ((by_slot.left[:, 2] == 0) & (by_slot.right[:, 2] == 1) & (by_slot.tuple_pos[:, 2] == 0)).any()


def test_rrnn_gru_trees_and_its_structural_term():
    torch.manual_seed(0)
    assert RRNNGRU(4, n_tuples=4, tree="gru_torch").cell.space.n_iterations == 9
    with pytest.raises(CellGraphError, match="unknown RRNN-GRU tree"):
        RRNNGRU(4, tree="lstm")
    with pytest.raises(CellGraphError, match="placement 'flexible'"):
        RRNNGRU(4, placement="gates", structure_term=True)
    cell = RRNNGRU(4, n_tuples=2, structure_term=True).cell
    assert cell.structure_logits.shape == (len(cell.choosing_nodes), 3)
    assert any(p is cell.structure_logits for p in cell.scoring_parameters())


def test_full_rrnn_structural_logits_are_scoring_parameters():
    cell = RRNN(4, n_tuples=2, n_iterations=3, scoring_hidden=3, structure_term=True).cell
    (logits,) = cell.structure_logits
    assert logits.shape == (3, n_slots(cell.spaces[0]))
    assert any(p is logits for p in cell.scoring_parameters())


@pytest.mark.parametrize("changes, message", [
    ({"structure_term": False}, "structure_term=True"),
    ({"exclusion": "value"}, "exclusion='slot'"),
    ({"n_tuples": 3}, "n_tuples=4"),
    ({"n_iterations": 8}, "n_iterations=9"),
])
def test_a_warm_start_names_what_it_needs(changes, message):
    good = dict(model="rrnn", warm_start="teacher", structure_term=True, exclusion="slot", n_tuples=4)
    TrainConfig(**good)
    with pytest.raises(FormatError, match=message):
        TrainConfig(**{**good, **changes})
    with pytest.raises(FormatError, match="tree='gru_torch'"):
        TrainConfig(model="rrnn-gru", warm_start="teacher", structure_term=True, n_tuples=4)
    with pytest.raises(FormatError, match="placement=flexible"):
        TrainConfig(model="rrnn-gru", structure_term=True, placement="gates")


def test_warm_start_refuses_a_model_it_cannot_set():
    teacher = _teacher()
    plain = TaskModel(TrainConfig(model="rrnn", hidden_size=P, n_tuples=4), V, V, True, states=("h",)).double()
    with pytest.raises(CellGraphError, match="structural term"):
        warm_start(plain, teacher)
    with pytest.raises(CellGraphError, match="teacher must be a gru"):
        warm_start(_student("rrnn", "hard"), plain)


def test_warm_start_trains_the_teacher_first_and_records_it(tmp_path):
    """``warm_start=teacher`` without ``--teacher`` trains the gru run in RUN/teacher, records it
    in config.json, and the run's untrained cells (epoch 0) are all the teacher's."""
    config = TrainConfig(task="planted", model="rrnn", hidden_size=6, scoring_hidden=4, max_train=32, max_eval=16,
                         seq_len=5, epochs=1, batch_size=16, log_structures=4, num_threads=1, n_tuples=4,
                         structure_term=True, exclusion="slot", warm_start="teacher", teacher_epochs=1,
                         mode="straight-through")
    lines: list[str] = []
    final = train(config, tmp_path / "run", log=lines.append)
    assert (tmp_path / "run" / "teacher" / "final.json").exists()
    assert json.loads((tmp_path / "run" / "config.json").read_text())["teacher"] == str(tmp_path / "run" / "teacher")
    assert any("training the teacher" in line for line in lines)
    start = json.loads((tmp_path / "run" / "structures" / "epoch_000.json").read_text())
    assert len(start["forms"]) == 1 and start["forms"][0]["canonical"].count("tanh") == 1
    assert final["test_accuracy"] is not None


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_straight_through_gives_the_chosen_cell_its_exact_gradient(model):
    """Warm-started and trained straight-through, the model's tuples get the teacher GRU's own
    gradient (the chosen candidates take the whole gradient, the relaxation only reaches the
    scores), and the structural logits get a gradient of their own."""
    teacher, student = _teacher(), _student(model, "straight-through")
    warm_start(student, teacher, 0.9)
    tokens = torch.randint(0, V, (4, 7), generator=torch.Generator().manual_seed(4))
    for net in (teacher, student):
        logits, _ = net(tokens)
        torch.nn.functional.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1)).backward()
    want = teacher.core.rnn.weight_ih_l0.grad[:P]  # W_ir, laid on tuple 0's L
    assert (student.core.cell.weight_L.grad[0] - want).abs().max().item() < 1e-9 * max(1.0, want.abs().max().item())
    logits = student.core.cell.structure_logits
    assert (logits[0] if model == "rrnn" else logits).grad.abs().sum() > 0


@pytest.mark.parametrize("mode", ["soft", "straight-through"])
@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_a_constant_alpha_is_not_run_and_the_model_is_the_same(model, mode):
    """The recipe (warm start, ``score_lr=0``) leaves alpha's output layer zero, so the cells
    skip the scoring network: after the same perturbation of the warm-started tuples and
    structural logits, the same logits and cells (one for every sample and step: with alpha
    constant the structural logits alone choose), and the same gradients of every parameter
    but alpha's, whose first layer gets none."""
    teacher, results = _teacher(), []
    for constant in (False, True):
        student = _student(model, mode, warm_start="teacher", score_lr=0.0 if constant else 1.0)
        assert student.core.cell.constant_alpha == constant
        warm_start(student, teacher, 0.9)
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for name, param in sorted(student.named_parameters()):
                if "scoring" not in name:
                    param.add_(0.3 * torch.randn(param.shape, generator=g, dtype=param.dtype))
        tokens = torch.randint(0, V, (4, 7), generator=torch.Generator().manual_seed(4))
        logits, traces = student(tokens)
        torch.nn.functional.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1)).backward()
        cells = [str(student.cell(traces, t, b)) for t in range(7) for b in range(4)]
        results.append((logits.detach(), cells, dict(student.named_parameters())))
    (want, want_cells, want_params), (got, got_cells, got_params) = results
    assert got_cells == want_cells and len(set(got_cells)) == 1
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for name, param in got_params.items():
        if "scoring" in name:
            assert param.grad is None or name.endswith("2.bias") or name.endswith("2.weight"), name
            continue
        torch.testing.assert_close(param.grad, want_params[name].grad, rtol=1e-9, atol=1e-12, msg=name)


def test_only_the_recipe_settings_make_alpha_constant():
    from cellgraph.backends.torch.training.task import constant_alpha
    from cellgraph.experiment.config import resolve_config

    assert constant_alpha(resolve_config("recipe-rrnn", None, {}))
    assert not constant_alpha(resolve_config("recipe-rrnn", None, {"score_lr": 0.5}))
    assert not constant_alpha(resolve_config("recipe-rrnn", None, {"warm_start": "none", "score_lr": 0.0}))
    assert not constant_alpha(TrainConfig(model="rrnn"))


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_a_training_step_of_the_recipe_leaves_alpha_as_the_warm_start_set_it(model):
    """Under the recipe's settings alpha is a constant in training, not only by name: the warm
    start zeroes its output layer, and the optimizer ``train`` makes gives alpha no step, even
    with a gradient on every one of its parameters; the rest of the model moves."""
    from cellgraph.backends.torch.runs.train import _optimizer
    from cellgraph.experiment.config import resolve_config

    config = resolve_config(f"recipe-{model}", None, {"hidden_size": P, "scoring_hidden": 5})
    torch.manual_seed(0)
    student = TaskModel(config, V, V, True, states=("h",)).double()
    warm_start(student, _teacher(0))
    before = {name: param.detach().clone() for name, param in student.named_parameters()}
    optimizer = _optimizer(student, config)
    tokens = torch.randint(0, V, (3, 7), generator=torch.Generator().manual_seed(2))
    student(tokens)[0].square().mean().backward()
    alpha = {name for name, param in student.named_parameters() if any(param is a for a in student.alpha_parameters())}
    for name, param in student.named_parameters():
        if name in alpha:
            param.grad = torch.ones_like(param)
    optimizer.step()
    moved = {name for name, param in student.named_parameters() if not torch.equal(param, before[name])}
    assert alpha and moved and not moved & alpha
    outputs = [param for name, param in student.named_parameters() if name in alpha and name.endswith("2.weight")]
    assert len(outputs) == 1 and not outputs[0].any()


def test_a_warm_started_gru_is_its_teacher_continued(tmp_path):
    """A ``gru`` run with ``warm_start=teacher`` takes the teacher's weights (the control of a
    warm-started search: the teacher continued with a fresh optimizer); other baselines refuse."""
    teacher, student = _teacher(0), _teacher(1)
    warm_start(student, teacher)
    tokens = torch.randint(0, V, (3, 7), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(student(tokens)[0], teacher(tokens)[0])
    with pytest.raises(FormatError, match="no warm start for lstm"):
        TrainConfig(model="lstm", warm_start="teacher")
    config = TrainConfig(task="planted", model="gru", hidden_size=6, max_train=32, max_eval=16, seq_len=5,
                         epochs=1, batch_size=16, num_threads=1, warm_start="teacher", teacher_epochs=1)
    train(config, tmp_path / "run", log=lambda line: None)
    first = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    taught = json.loads((tmp_path / "run" / "teacher" / "final.json").read_text())
    assert first["epoch"] == 1 and taught["val_accuracy"] is not None
    # that teacher continued by a run of another seed (another initialisation) at lr 1e-12, under
    # which an epoch moves no weight by more than ~1e-11: the run ends where it started
    teacher_dir = tmp_path / "run" / "teacher"
    train(config.replace(seed=1, lr=1e-12, teacher=str(teacher_dir)), tmp_path / "continued", log=lambda line: None)
    started = load_checkpoint(tmp_path / "continued" / "checkpoints" / "last.pt")["model"]
    teacher = load_checkpoint(teacher_dir / "checkpoints" / "last.pt")["model"]
    assert started.keys() == teacher.keys()
    for name, weight in teacher.items():
        torch.testing.assert_close(started[name], weight, rtol=0, atol=1e-9, msg=name)
