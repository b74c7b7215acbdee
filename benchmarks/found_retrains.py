"""A search's best cells retrained from scratch on a training task, beside the GRU and the LSTM
with matched parameter counts and epochs (docs/discover.md, *On real data*).

For the ``--top`` best cells of a ``cellgraph discover --task`` run (``--search DIR``: its
``best/cell_1.json``, ``best/cell_2.json``, ...) and every seed (``--seeds``, default 0 1 2),
``cellgraph train --model cell --set cell=FILE`` on ``--task`` (default the search's) at
``--hidden-size`` (default 100) into ``ROOT/cellK-sSEED``; then ``nn.GRU`` and ``nn.LSTM``
(``ROOT/gru-sSEED``, ``ROOT/lstm-sSEED``) at the hidden sizes whose parameter counts are
nearest the cells' mean (:func:`matched_size`). Every run trains ``--epochs`` epochs with the
task's other defaults (``--set KEY=VALUE`` goes to every run), one at a time, one torch thread;
a run with ``final.json`` is kept, an interrupted one resumed, so the command reruns.
``--records DIR`` keeps each finished run's record (never checkpoints), which ``--table``
reads: ``cellgraph summarize --by name`` of them, one row per cell, GRU and LSTM, and each
model's parameter count and hidden size.

The parameter counts are the models' (``tests/backends/torch/test_cell_model.py`` checks them):
the embedding ``V p`` and the output layer ``2 p C + C`` (``C = V`` for a language model) for
all three, and a core of ``K (2 p^2 + p)`` for a cell of ``K`` trainable tuples, ``6 p^2 + 6 p``
for the GRU and ``8 p^2 + 8 p`` for the LSTM.

    python -m cellgraph.benchmarks.found_retrains --search runs/discover-wiki5k-rnn-motifs-first-s0 --root runs/found-wiki5k --records results/found-wiki5k --epochs 20
    python -m cellgraph.benchmarks.found_retrains --table --records results/found-wiki5k
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cellgraph.benchmarks.recipe_ablation import run_one
from cellgraph.data.datasets import load_dataset
from cellgraph.errors import CellGraphError
from cellgraph.experiment.summary import markdown, summarize
from cellgraph.files import read_json

__all__ = ["CORES", "trainable_tuples", "parameters", "matched_size", "runs", "sizes", "main"]

#: Each baseline's core parameters at hidden size ``p``.
CORES = {"gru": lambda p: 6 * p * p + 6 * p, "lstm": lambda p: 8 * p * p + 8 * p}


def trainable_tuples(cell: dict) -> int:
    """``K``: the trainable tuples of a ``cellgraph.dag`` document's layout."""
    return sum(1 for t in cell["layout"] if not t.get("identity"))


def parameters(core: int, p: int, vocab: int, classes: int) -> int:
    """A model's trainable parameters: its ``core`` plus the embedding and the output layer."""
    return core + vocab * p + 2 * p * classes + classes


def matched_size(model: str, target: float, vocab: int, classes: int) -> int:
    """The hidden size of ``model`` (``gru``, ``lstm``) whose parameter count is nearest ``target``."""
    count = lambda p: parameters(CORES[model](p), p, vocab, classes)  # noqa: E731
    p = 1
    while count(p + 1) <= target:
        p += 1
    return p if abs(count(p) - target) <= abs(count(p + 1) - target) else p + 1


def runs(search: Path, task: str, top: int, seeds: list[int], hidden: int, epochs: int, extra: list[str],
         vocab: int, classes: int) -> list[tuple[str, list[str]]]:
    """``(name, cellgraph train arguments)`` of every run: the cells, then the GRU and the LSTM."""
    files = [search / "best" / f"cell_{k}.json" for k in range(1, top + 1)]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise CellGraphError(f"--search {search}: no {', '.join(missing)} (has the search finished?)")
    counts = [parameters(trainable_tuples(read_json(f)) * (2 * hidden * hidden + hidden), hidden, vocab, classes)
              for f in files]
    mean = sum(counts) / len(counts)
    common = ["--task", task, "--set", f"epochs={epochs}", "--set", "num_threads=1", *extra]
    out = []
    for seed in seeds:
        out += [(f"cell{k}-s{seed}", [*common, "--model", "cell", "--set", f"cell={f}", "--set", f"hidden_size={hidden}",
                                      "--set", f"seed={seed}"]) for k, f in enumerate(files, 1)]
        out += [(f"{model}-s{seed}", [*common, "--model", model, "--set",
                                      f"hidden_size={matched_size(model, mean, vocab, classes)}", "--set", f"seed={seed}"])
                for model in CORES]
    return out


def sizes(folder: Path) -> str:
    """One line: each model's trainable parameters and hidden size (its first finished run's)."""
    seen: dict[str, str] = {}
    for run in sorted(d for d in folder.iterdir() if (d / "final.json").exists()):
        name = run.name.rsplit("-s", 1)[0]
        if name not in seen:
            count = read_json(run / "final.json").get("parameters")
            seen[name] = f"{name} {count:,} (p = {read_json(run / 'config.json')['hidden_size']})"
    return "parameters: " + ", ".join(seen.values())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--search", metavar="DIR", help="a finished cellgraph discover --task run")
    p.add_argument("--task", default=None, help="the training task (default the search's)")
    p.add_argument("--top", type=int, default=3, help="best cells retrained (default %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="(default %(default)s)")
    p.add_argument("--hidden-size", type=int, default=100, help="the cells' hidden size (default %(default)s)")
    p.add_argument("--epochs", type=int, default=20, help="epochs of every run (default %(default)s)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of every run")
    p.add_argument("--root", default="runs/found-retrains", help="run folders (default %(default)s)")
    p.add_argument("--records", default=None, metavar="DIR", help="keep each finished run's record here")
    p.add_argument("--table", action="store_true", help="run nothing: print the records' table")
    a = p.parse_args(argv)
    try:
        if not a.table:
            if a.search is None:
                p.error("--search is required unless --table")
            if min(a.top, a.hidden_size, a.epochs) < 1 or min(a.seeds) < 0:
                p.error("--top, --hidden-size and --epochs must be >= 1, --seeds >= 0")
            search = Path(a.search)
            task = a.task or read_json(search / "discovery.json")["config"]["task"]
            data = load_dataset(task)
            extra = [flag for kv in a.set for flag in ("--set", kv)]
            root = Path(a.root)
            root.mkdir(parents=True, exist_ok=True)
            for name, args in runs(search, task, a.top, a.seeds, a.hidden_size, a.epochs, extra, len(data.vocab),
                                   data.n_classes):
                print(run_one(root, name, args, a.records and Path(a.records)), flush=True)
        folder = Path(a.records or a.root)
        print(markdown(summarize(sorted(str(d) for d in folder.iterdir() if d.is_dir()), by="name")))
        print(sizes(folder))
    except CellGraphError as err:
        p.exit(2, f"{p.prog}: error: {err}\n")


if __name__ == "__main__":
    main()
