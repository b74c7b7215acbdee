"""The teacher retrains end to end on tiny sizes: they train, keep records, skip what is done and
print the table from the records."""

import json
import statistics

import pytest

from cellgraph.benchmarks import teacher_retrains

pytest.importorskip("torch")
TINY = ["--set", "epochs=1", "--set", "max_train=64", "--set", "max_eval=64", "--set", "seq_len=4",
        "--set", "hidden_size=8"]


def test_each_run_trains_its_teacher_as_its_cell_or_a_gru_with_one_thread():
    (cell, cell_args), (gru, gru_args) = teacher_retrains.runs(("random:3",), (2,), ("epochs=4",))
    assert (cell, gru) == ("random3-cell-s2", "random3-gru-s2")
    assert cell_args == ["--task", "planted", "--model", "cell", "--set", "planted_teacher=random:3",
                         "--set", "cell=random:3", "--set", "seed=2", "--set", "num_threads=1", "--set", "epochs=4"]
    assert gru_args == ["--task", "planted", "--model", "gru", "--set", "planted_teacher=random:3",
                        "--set", "seed=2", "--set", "num_threads=1", "--set", "epochs=4"]
    assert [name for name, _ in teacher_retrains.runs(("random:3:4-7",), (0,))] == ["random3-4to7-cell-s0",
                                                                                   "random3-4to7-gru-s0"]


def test_the_retrains_run_keep_records_skip_what_is_done_and_tabulate(tmp_path, capsys):
    root, records = tmp_path / "runs", tmp_path / "records"
    args = ["--root", str(root), "--records", str(records), "--teachers", "mgu", "--seeds", "0", "1", *TINY]
    teacher_retrains.main(args)
    out = capsys.readouterr().out
    names = ["mgu-cell-s0", "mgu-cell-s1", "mgu-gru-s0", "mgu-gru-s1"]
    assert [line for line in out.splitlines() if ": " in line] == [f"{n}: exit 0" for n in names]
    kept = sorted(p.relative_to(records).as_posix() for p in records.rglob("*") if p.is_file())
    assert {"mgu-gru-s1/config.json", "mgu-gru-s1/final.json", "mgu-gru-s1/metrics.jsonl", "mgu-gru-s1.log"} <= set(kept)
    assert not any("checkpoints" in k for k in kept) and (root / "mgu-gru-s1" / "checkpoints").is_dir()
    final = {n: json.loads((records / n / "final.json").read_text()) for n in names}
    accuracy = {n: f["test_accuracy"] for n, f in final.items()}
    gru_recovered = sum(accuracy[f"mgu-gru-s{s}"] >= accuracy[f"mgu-cell-s{s}"] - 0.01 for s in (0, 1))
    cell_row, gru_row = out.splitlines()[-2:]
    for row, model, exact, recovered in ((cell_row, "cell", 2, 2), (gru_row, "gru", 0, gru_recovered)):
        values = [accuracy[f"mgu-{model}-s{s}"] for s in (0, 1)]
        spread = f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}"
        assert row.split() == ["mgu", model, "0,1", "1", f"{exact}/2", f"{recovered}/2", *spread.split()]
    assert all(f["recovery"]["exact_recovery"] == ("cell" in n) for n, f in final.items())
    teacher_retrains.main(args)
    assert capsys.readouterr().out.splitlines()[:4] == [f"{n}: done" for n in names]
    teacher_retrains.main(["--table", "--records", str(records), "--root", str(tmp_path / "nowhere")])
    assert capsys.readouterr().out.splitlines()[-2:] == [cell_row, gru_row]
