"""The discovery step of ``cellgraph demo`` (docs/discover.md, *In the demo*).

On planted values whose teacher is MGU (not the GRU), local search with the motif moves starts at
Elman's one-node tanh RNN (target ``rnn``) and spends :data:`BUDGET` full-fidelity evaluations;
random search spends as many with the same evaluator. Each runs as ``cellgraph discover`` runs it
(:func:`cellgraph.discover.planted.planted_search`, the command's defaults) into its own
folder, so a rerun of the demo resumes it, and writes its best cells as the command does. The
step prints the teacher's equations, each search's best cell as sympy equations, whether it
recovers the teacher exactly and at which evaluation, and the command that runs the same search.

The evaluator comes from the backend plugin, so the core still never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # the search needs optuna, an extra: without it the step says so
    from cellgraph.discover.search import Discovery

__all__ = ["BUDGET", "QUICK", "Arm", "Sizes", "run_discovery"]

TEACHER, START = "mgu", "rnn"
#: Full-fidelity evaluations of each search: the smallest budget with which local search from
#: ``rnn`` recovers MGU at the default sizes on seeds 0, 1 and 2 (docs/discover.md, *In the demo*).
BUDGET = 40


@dataclass(frozen=True)
class Sizes:
    """The step's scale: planted data sizes and fit settings (``cellgraph discover``'s flags;
    those left out keep the command's defaults), epochs per evaluation and the budget."""

    data: dict[str, int] = field(default_factory=dict)
    fit: dict[str, Any] = field(default_factory=dict)
    epochs: int = 20
    budget: float = BUDGET


#: ``--quick``: tiny data, one epoch and one restart per cell, three evaluations per search.
QUICK = Sizes({"n_train": 50, "n_val": 20, "n_test": 20, "seq_len": 4, "p": 4, "n_out": 2}, {"restarts": 1},
              epochs=1, budget=3)


@dataclass(frozen=True)
class Arm:
    """One search of the step: what it is (``name``), its ``folder`` (``OUT/discovery/local`` or
    ``random``), the ``command`` that runs it, its result and its best cells' rows as
    :func:`~cellgraph.cli.commands.discover.write_best` wrote them."""

    name: str
    folder: Path
    command: str
    result: Discovery
    best: list[dict[str, Any]]


def _command(flags: str, sizes: Sizes, seed: int, folder: Path) -> str:
    """The ``cellgraph discover`` command of a search with strategy ``flags``: the same study."""
    data = "".join(f" --{k.replace('_', '-')} {v}" for k, v in {**sizes.data, **sizes.fit}.items())
    return (f"cellgraph discover --teacher {TEACHER} {flags} --budget {sizes.budget:g} --epochs {sizes.epochs}"
            f"{data} --seed {seed} --data-seed {seed} --dir {folder}")


def _recovery(result: Discovery) -> str:
    """Whether the search's answer is the teacher, and from which evaluation."""
    hit, proposed = result.target, result.proposed
    if hit is not None:
        return (f"recovers {TEACHER} exactly: its best cell since evaluation {hit.evaluations:g} "
                f"(trial #{hit.trial}, {hit.cpu_seconds:.0f} CPU s in all)")
    if proposed is not None:
        return f"does not recover {TEACHER}: it trained it at evaluation {proposed.evaluations:g}, not the best"
    return f"does not recover {TEACHER}: it never proposed it"


def _report(arm: Arm, log: Callable[[str], None]) -> None:
    from cellgraph.discover import cell_from_json
    from cellgraph.discover.show import candidate_equations, candidate_form

    result = arm.result
    log(f"    {result.evaluations:g} evaluations, {result.trained} cells trained")
    if not result.best:
        log("    no cell reached full fidelity")
        return
    row, root = arm.best[0], cell_from_json(result.best[0].cell)
    log(f"    best cell: objective {row['objective']:.4g} (val_mse {row.get('val_mse', float('nan')):.4g}, "
        f"complexity {row.get('complexity', '-')}), {arm.folder / row['file']}")
    log(f"    {candidate_form(root)}")
    log(candidate_equations(root, "      "))
    log(f"    {_recovery(result)}")


def run_discovery(out: str | Path, seed: int = 0, quick: bool = False, backend: str = "torch",
                  log: Callable[[str], None] = print) -> tuple[Arm, ...]:
    """Run the step into ``out/discovery`` with the plugin ``backend`` (data and training seed
    ``seed``; :data:`QUICK` sizes when ``quick``) and print it through ``log``; the two searches,
    local search first (none, saying why, without optuna)."""
    try:
        import optuna
    except ModuleNotFoundError:
        from cellgraph.cli.commands.tune import MISSING

        log(f"  skipped: {MISSING}")
        return ()
    from cellgraph.cli.commands.discover import write_best
    from cellgraph.discover import CellSpace, Fidelity, LocalSearch, RandomSearch, cell_hash, discover, from_cell
    from cellgraph.discover.planted import planted_search
    from cellgraph.targets import target

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sizes = QUICK if quick else Sizes()
    _, teacher, evaluator, settings = planted_search(TEACHER, seed, sizes.data, sizes.fit, backend=backend)
    log(f"  the planted teacher, {TEACHER} (data seed {seed}):")
    for line in target(TEACHER).equations:
        log(f"    {line}")
    start = target(START)
    plan = [("local search with the motif moves, from rnn", "local",
             LocalSearch(seeds=(from_cell(start.cell, start.layout),), motifs=True),
             f"--strategy local --motifs --seed-target {START}"),
            ("random search, the same budget", "random", RandomSearch(), "--strategy random")]
    arms = []
    for title, name, strategy, flags in plan:
        folder = Path(out) / "discovery" / name
        log(f"  {title}: {sizes.budget:g} evaluations of {sizes.epochs} epochs into {folder}")
        result = discover(CellSpace(), evaluator, strategy, sizes.budget, fidelity=Fidelity((sizes.epochs,)),
                          run_dir=folder, seed=seed, target_hash=cell_hash(teacher), keep=1, settings=settings)
        arm = Arm(title, folder, _command(flags, sizes, seed, folder), result,
                  write_best(folder, result, cell_hash(teacher)))
        _report(arm, log)
        arms.append(arm)
    local, rand = arms
    if local.best and rand.best:
        log(f"  random search's best objective {rand.best[0]['objective']:.4g} against local search's "
            f"{local.best[0]['objective']:.4g}")
    log("  the same searches from the command line (the same folder: a larger --budget goes on):")
    for arm in arms:
        log(f"    {arm.command}")
    if local.best:
        log(f"  retrain the cell found as a network: cellgraph train --task planted --set planted_teacher={TEACHER} "
            f"--model cell --set cell={local.folder / local.best[0]['file']}")
    return tuple(arms)
