"""The paper's authors' code as a second witness: their RRNN-GRU (``trainer.py``) and their
Keras GRU baseline (``keras_gru.py``) trained, unchanged, on our Wiki-10k data.

Their repository (``matthewkennedy5/RRNN``, branch ``planB``, commit ``e9fe074``) has no
license, so nothing of it is copied here: the user checks it out, and this script imports
its modules from that folder. Their files are never edited; what today's libraries need is
applied from outside (:data:`SHIMS`, printed by ``--shims``).

Our data in their format: the cleaned corpus (``wiki_cleaning``, default ``wikifil``, their
text) goes to ``enwik8_clean.txt``, and their ``standard_data.partition_data`` embeds our
windows (the 10,000 / 1,000 / 2,000 starts that ``cellgraph`` draws with ``data_seed``) with
their ``train20_embedding`` character vectors, normalises them by the training set's
statistics and pickles them, as it does for their own random starts.

What their training does (read from their files; the record repeats it):

- RRNN-GRU (``trainer.py``): Adam on the loss ``lambdas = [1, 0.1, 1e-8, 0.003]`` (task summed
  over the 20 steps, margin, L2 over all parameters, TD against their pre-trained GRU
  ``gru_parameters_new.pt``), batch 128, scoring hidden 64, lr 3e-3 in their ``params.json``
  (``--settings params``) or the paper's Appendix 1e-3 (``appendix``, the default); no gradient
  clipping (``max_grad`` is read by no line); alternation: the weights train first, the trainer
  switches to the scoring network after epoch 1 and then every ``alternate_every`` (5) epochs;
  the output layer trains in both phases. The cell always mixes the candidates by softmax
  (soft), in training and in validation alike; validation is one forward pass over the
  validation set after every epoch; the last epoch's weights are kept (no checkpoint selection).
- GRU (``keras_gru.py``): a Keras GRU of 100 units, a dense softmax layer over the 27
  characters, L2 on the kernels, Adam, ``sparse_categorical_crossentropy``, no early stopping;
  the paper's Appendix settings for the Wiki-10k GRU (batch 41, lr 1.4231e-3, L2 1.2124e-11:
  ``appendix``, the default) or the best ones in the comment at the end of their file (batch 18,
  lr 1.71e-3, L2 3.6e-7: ``comment``).

The metric: bits per character, the mean cross-entropy per character over ln 2 (their
RRNN-GRU's validation loss is summed over the 20 steps, so it is divided by 20 first).

The environment (TensorFlow's CPU wheel beside torch; their code needs gensim too)::

    python -m venv /tmp/witness && /tmp/witness/bin/pip install torch==2.13.0 && \\
    /tmp/witness/bin/pip install tensorflow-cpu gensim tqdm matplotlib && \\
    /tmp/witness/bin/pip install --no-deps -e .

Run (one model and seed per call; ``--epochs`` and ``--max-minutes`` bound the budget)::

    OMP_NUM_THREADS=1 nice -n 10 /tmp/witness/bin/python benchmarks/authors_witness.py \\
        CHECKOUT rrnn-gru --seed 0 --epochs 8 --out results/witness

The record ``OUT/<model>-<settings>-s<seed>.json`` holds the settings, seed, versions, shims, the
per-epoch validation BPC, the final test BPC and what their code printed (``OUT/<model>-<settings>-s<seed>.log``,
progress bars as their last state).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable

from cellgraph.data.text import WIKI_CLEANINGS

#: (their file, line, what is applied from outside, why).
SHIMS: tuple[tuple[str, int, str, str], ...] = (
    ("standard_data.py", 9, "a stub module torchtext with data.Dataset = torch.utils.data.Dataset",
     "torchtext's legacy data.Dataset (their datasets' base class) was removed in torchtext 0.12; "
     "their Wiki path uses nothing else of torchtext"),
    ("trainer.py", 6, "the same torchtext stub", "imported, not used"),
    ("standard_data.py", 25, "gensim's Word2Vec.load returns the model's KeyedVectors (.wv)",
     "gensim 4 models are not subscriptable; their code reads EMBED['a'] (lines 30, 93, 95)"),
    ("trainer.py", 322, "their trainer's torch.load (their_torch) reads ../gru_parameters_new.pt with "
     "weights_only=False", "the file is a pickled nn.GRU module of the legacy format, which has no "
     "tensors-only form; torch >= 2.6 loads only tensors by default"),
    ("trainer.py", 322, "nn.GRU unpickling sets _flat_weights from the module's parameters where the "
     "pickle lacks them", "the module was pickled by a torch older than 1.4, whose GRU kept no "
     "_flat_weights; today's __setstate__ reads them"),
    ("keras_gru.py", 97, "tf.keras.optimizers.Adam accepts lr= as learning_rate=",
     "Keras 3 removed the lr argument"),
    ("keras_gru.py", 98, "load_data('wiki') gives the labels as character ids (argmax of the one-hot)",
     "sparse_categorical_crossentropy needs ids; their pickle holds one-hot labels, which their "
     "RRNN-GRU's EnWik8Clean turns into ids the same way (standard_data.py line 230)"),
)

#: Their RRNN-GRU settings for Wiki-10k: their params.json at planB e9fe074 (``params``), and the
#: same with the paper's Appendix learning rate for Wiki-10k RRNN-GRU, 1e-3 (``appendix``; the
#: other values agree with the Appendix).
RRNN_GRU_PARAMS: dict[str, dict[str, Any]] = {"params": {
    "learning_rate": 3e-3, "multiplier": 1, "lambdas": [1, 0.1, 1e-8, 0.003], "validate_every": 1,
    "loss2_margin": 1, "scoring_hidden_size": 64, "batch_size": 128, "epochs_per_checkpoint": 1000,
    "pickle_every": 1000, "optimizer": "adam", "embeddings": "gensim", "max_grad": 1,
    "initial_train_mode": "weights", "alternate_every": 5, "warm_start": False, "weights_file": "",
    "pretrained_weights": False, "device": "cpu", "dataset": "wiki",
}}
RRNN_GRU_PARAMS["appendix"] = {**RRNN_GRU_PARAMS["params"], "learning_rate": 1e-3}
#: Their Keras GRU's settings: the paper's Appendix for the Wiki-10k GRU (``appendix``, our
#: ``paper-wiki10k-gru`` preset), or the best ones in the comment at the end of keras_gru.py
#: (``comment``; the Appendix lists them for Wiki-5k).
GRU_PARAMS: dict[str, dict[str, Any]] = {
    "appendix": {"batch_size": 41, "learning_rate": 1.4231e-3, "reg": 1.2124e-11, "hidden_size": 100,
                 "dataset": "wiki"},
    "comment": {"batch_size": 18, "learning_rate": 0.0017111124938516654, "reg": 3.5989197176496724e-07,
                "hidden_size": 100, "dataset": "wiki"},
}
SIZES = {"train": 10_000, "val": 1_000, "test": 2_000}
LN2 = math.log(2)


def shims_table() -> str:
    return "\n".join(f"{f}:{line}: {what} ({why})" for f, line, what, why in SHIMS)


def install_shims() -> None:
    """Apply :data:`SHIMS` before their modules are imported (none of their files changes)."""
    import torch
    import torch.utils.data
    from gensim.models import Word2Vec

    stub = types.ModuleType("torchtext")
    stub.data = types.SimpleNamespace(Dataset=torch.utils.data.Dataset)  # type: ignore[attr-defined]
    stub.datasets = types.SimpleNamespace()  # type: ignore[attr-defined]
    sys.modules["torchtext"] = stub
    load = Word2Vec.load
    Word2Vec.load = classmethod(lambda cls, *a, **k: load(*a, **k).wv)  # type: ignore[method-assign]
    setstate = torch.nn.GRU.__setstate__

    def gru_setstate(self: Any, state: dict[str, Any]) -> None:
        if "_flat_weights" not in state:  # pickled by a torch older than 1.4
            names = [n for layer in state["_all_weights"] for n in layer]
            state = {**state, "_flat_weights_names": names, "_flat_weights": [state["_parameters"][n] for n in names]}
        setstate(self, state)

    torch.nn.GRU.__setstate__ = gru_setstate


def their_torch(loaded: dict[str, Any]) -> types.ModuleType:
    """torch as their ``trainer.py`` sees it: the same, but its one ``torch.load`` call (line 322,
    ``../gru_parameters_new.pt``; ``warm_start`` is off) unpickles their GRU module, which has
    no tensors-only form, and keeps it in ``loaded["gru"]``. This is the one file cellgraph
    unpickles: a file of the checkout the user names, whose code this script runs anyway."""
    import torch

    def load(path: str, *args: Any, **kwargs: Any) -> Any:
        loaded["gru"] = torch.load(path, weights_only=False)
        return loaded["gru"]

    view = types.ModuleType("torch")
    view.__dict__.update(torch.__dict__)
    view.load = load  # type: ignore[attr-defined]
    return view


def write_their_data(checkout: Path, work: Path, args: argparse.Namespace) -> Any:
    """Our corpus and window starts through their ``partition_data`` (module docstring);
    returns their ``standard_data`` module, pointed at the pickle."""
    from cellgraph.data.datasets import load_dataset
    from cellgraph.data.text import find_enwik8, read_enwik8

    data = load_dataset("wiki", args.data, seed=args.data_seed, wiki_cleaning=args.cleaning)
    corpus = work / "enwik8_clean.txt"
    if not corpus.exists():
        corpus.write_text(read_enwik8(find_enwik8(data.info["source"]), args.cleaning), encoding="ascii")
    os.chdir(checkout)  # their modules load train20_embedding from the working folder
    sys.path.insert(0, str(checkout))
    import standard_data  # noqa: E402  (theirs)

    standard_data.CORPUS_FILENAME, standard_data.SAVE_FILE = str(corpus), str(work / "10k_data_more.pkl")
    standard_data.N_TRAIN, standard_data.N_VAL, standard_data.N_TEST = SIZES.values()
    starts = [list(map(int, data.splits[k].origin)) for k in SIZES]
    standard_data.pick_indices = lambda corpus_length: tuple(starts)
    if not Path(standard_data.SAVE_FILE).exists():
        standard_data.partition_data()
    return standard_data


def run_rrnn_gru(checkout: Path, work: Path, args: argparse.Namespace, log: io.TextIOBase) -> dict[str, Any]:
    """Their ``trainer.run`` with ``--settings``; the test set scored by their
    ``RRNNTrainer.train_step_cuda`` (the loss their validation prints) on the final weights."""
    import torch
    from torch.utils.data import DataLoader

    import standard_data
    import trainer  # theirs
    from GRU import RRNNforGRU  # theirs

    params = {**RRNN_GRU_PARAMS[args.settings], "nb_train": SIZES["train"], "nb_val": SIZES["val"], "epochs": args.epochs,
              "max_time": args.max_minutes * 60}
    run_dir = work / f"rrnn-gru-{args.settings}-s{args.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    link = work / "gru_parameters_new.pt"  # trainer.run reads ../gru_parameters_new.pt
    if not link.exists():
        link.symlink_to(checkout / "gru_parameters_new.pt")
    os.chdir(run_dir)
    for stale in ("val_loss.txt", "val_acc.txt"):
        Path(stale).unlink(missing_ok=True)
    loaded: dict[str, Any] = {}
    trainer.torch = their_torch(loaded)
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        trainer.run(params)
    val = [float(line.split()[0]) / 20 / LN2 for line in Path("val_loss.txt").read_text().splitlines()]
    model = RRNNforGRU(trainer.HIDDEN_SIZE, 27, batch_size=params["batch_size"],
                       scoring_hsize=params["scoring_hidden_size"])
    model.load_state_dict(torch.load("final_weights.pt", weights_only=True))  # a state dict
    test = standard_data.EnWik8Clean(subset="test", n_data=SIZES["test"])
    scorer = trainer.RRNNTrainer(model, loaded["gru"], None, None, params)
    with torch.no_grad():
        x, y = next(iter(DataLoader(test, batch_size=len(test))))
        losses, accuracy, _ = scorer.train_step_cuda(x, y)
    return {"params": params, "val_bpc": val, "test_bpc": float(losses[0]) / 20 / LN2,
            "test_accuracy": accuracy}


def run_gru(checkout: Path, work: Path, args: argparse.Namespace, log: io.TextIOBase) -> dict[str, Any]:
    """Their ``keras_gru.run`` with ``--settings``; the test set scored by the model
    it trained (Keras ``evaluate``)."""
    import numpy as np
    import tensorflow as tf

    import keras_gru  # theirs

    adam = tf.keras.optimizers.Adam
    tf.keras.optimizers.Adam = lambda lr=1e-3, **k: adam(learning_rate=lr, **k)
    load = keras_gru.load_data
    keras_gru.load_data = lambda dataset: tuple((x, np.argmax(y, axis=2)) for x, y in load(dataset))
    built: list[Any] = []
    sequential = keras_gru.Sequential
    keras_gru.Sequential = lambda *a, **k: built.append(sequential(*a, **k)) or built[-1]
    tf.keras.utils.set_random_seed(args.seed)
    params = {**GRU_PARAMS[args.settings], "epochs": args.epochs}
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        history = keras_gru.run(params)
        (_, _), (_, _), (x_test, y_test) = keras_gru.standard_data.load_standard_data()
        test_loss = built[0].evaluate(x_test.numpy().astype(np.float32), np.argmax(y_test.numpy(), axis=2),
                                      batch_size=256, verbose=0)[0]
    return {"params": params, "val_bpc": [v / LN2 for v in history.history["val_loss"]],
            "train_bpc": [v / LN2 for v in history.history["loss"]], "test_bpc": float(test_loss) / LN2,
            "note": f"Keras losses include the L2 terms ({params['reg']:g} times the squared kernels)"}


RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {"rrnn-gru": run_rrnn_gru, "gru": run_gru}


def table(out: Path) -> str:
    """The records in ``out`` as Markdown: per model and settings, the mean ± sample std over
    seeds of the last epoch's validation BPC, the best epoch's, and the test BPC (last epoch)."""
    import statistics

    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for path in sorted(out.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        groups.setdefault((record["model"], record["settings"], record["epochs"]), []).append(record)

    def cell(values: list[float]) -> str:
        if not all(map(math.isfinite, values)):
            return "not finite"
        mean, form = statistics.fmean(values), ".3f" if max(map(abs, values)) < 100 else ".3g"
        return f"{mean:{form}}" + (f" ± {statistics.stdev(values):{form}}" if len(values) > 1 else "")

    lines = ["| their model | settings | epochs | seeds | val, last epoch | val, best epoch | test, last epoch |",
             "|---|---|---|---|---|---|---|"]
    for (model, settings, epochs), records in groups.items():
        last, best = [r["val_bpc"][-1] for r in records], [min(r["val_bpc"]) for r in records]
        seeds = ", ".join(str(r["seed"]) for r in records)
        lines.append(f"| {model} | {settings} | {epochs} | {seeds} | {cell(last)} | {cell(best)} | "
                     f"{cell([r['test_bpc'] for r in records])} |")
    return "\n".join(lines)


def final_lines(printed: str) -> str:
    """What a terminal shows at the end: each line's text after its last carriage return (progress
    bars redraw with them), without colour codes."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in re.sub(r"\x1b\[[0-9;]*m", "", printed).split("\n"))


def versions(checkout: Path) -> dict[str, str]:
    found = {"python": platform.python_version(), "machine": platform.platform()}
    for name in ("torch", "numpy", "gensim", "tensorflow", "keras"):
        with contextlib.suppress(ImportError):
            found[name] = importlib.import_module(name).__version__
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found["checkout"] = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], check=True,
                                           capture_output=True, text=True).stdout.strip()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", nargs="?", help="their repository, checked out at planB e9fe074")
    parser.add_argument("model", nargs="?", choices=tuple(RUNNERS))
    parser.add_argument("--seed", type=int, default=0, help="seed of the initialisation and the batch order")
    parser.add_argument("--epochs", type=int, default=8, help="epochs (8: our Wiki-10k runs' cap)")
    parser.add_argument("--settings", choices=("appendix", "params", "comment"), default=None,
                        help="rrnn-gru: appendix (default; their params.json with the Appendix's lr 1e-3) or "
                             "params (their params.json, lr 3e-3); gru: appendix (default; the Appendix's "
                             "Wiki-10k GRU) or comment (keras_gru.py's closing comment)")
    parser.add_argument("--max-minutes", type=float, default=60.0,
                        help="rrnn-gru: their trainer stops after the epoch that passes this")
    parser.add_argument("--data", default=None, help="data folder (as cellgraph's --data)")
    parser.add_argument("--data-seed", type=int, default=0, help="cellgraph's data_seed of the windows")
    parser.add_argument("--cleaning", default="wikifil", choices=tuple(WIKI_CLEANINGS))
    parser.add_argument("--work", default="witness-work", help="folder of the corpus, the pickle and their run files")
    parser.add_argument("--out", default="results/witness", help="folder of the records")
    parser.add_argument("--shims", action="store_true", help="list the compatibility shims and exit")
    parser.add_argument("--table", action="store_true", help="print the records in --out as a table and exit")
    args = parser.parse_args(argv)
    if args.shims:
        print(shims_table())
        return 0
    if args.table:
        print(table(Path(args.out)))
        return 0
    if not args.checkout or not args.model:
        parser.error("CHECKOUT and MODEL are required (or --shims)")
    valid = {"rrnn-gru": RRNN_GRU_PARAMS, "gru": GRU_PARAMS}[args.model]
    if args.settings is not None and args.settings not in valid:
        parser.error(f"--settings {args.settings} is not one of {args.model}'s: {', '.join(valid)}")
    args.settings = settings = args.settings or "appendix"
    checkout = Path(args.checkout).resolve()
    if not (checkout / "trainer.py").is_file() or not (checkout / "keras_gru.py").is_file():
        parser.error(f"{checkout} is not a checkout of matthewkennedy5/RRNN planB (no trainer.py, keras_gru.py)")
    out, work = Path(args.out).resolve(), Path(args.work).resolve() / args.cleaning
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    import numpy as np
    import torch

    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    install_shims()
    name = f"{args.model}-{settings}-s{args.seed}"
    start = time.time()
    log = io.StringIO()
    try:
        write_their_data(checkout, work, args)
        result = RUNNERS[args.model](checkout, work, args, log)
    finally:
        (out / f"{name}.log").write_text(final_lines(log.getvalue()), encoding="utf-8")
    record = {"model": args.model, "settings": settings, "seed": args.seed, "epochs": args.epochs, "data_seed": args.data_seed,
              "wiki_cleaning": args.cleaning, "sizes": SIZES, "wall_s": round(time.time() - start, 1),
              "threads": torch.get_num_threads(), "command": " ".join(sys.argv), "versions": versions(checkout),
              "shims": [dict(zip(("file", "line", "what", "why"), s)) for s in SHIMS], **result}
    (out / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{name}: val BPC by epoch {[round(v, 3) for v in result['val_bpc']]}, test BPC {result['test_bpc']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
