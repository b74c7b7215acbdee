"""The screening of random teachers on tiny sizes: its records, their resumption, its table and
the identifiability checks of its best candidates."""

import json
from collections import Counter

import numpy as np
import pytest

from cellgraph.benchmarks import random_teachers
from cellgraph.data.planted import random_spec, random_teacher, refusals, run_cell, teacher_folder
from cellgraph.data.planted_values import load_planted_values
from cellgraph.discover.space import complexity, from_cell

pytest.importorskip("torch")
pytest.importorskip("optuna")
DATA = {"n_train": 50, "n_val": 20, "n_test": 20, "seq_len": 4, "p": 4, "n_out": 2}
TINY = [a for key, value in DATA.items() for a in (f"--{key.replace('_', '-')}", str(value))] + [
    "--epochs", "1", "--restarts", "1", "--weight-scale", "1"]


def test_the_screening_records_every_teacher_resumes_and_refuses_other_settings(tmp_path, capsys):
    args = ["--records", str(tmp_path), "--seeds", "2", "--sizes", "4-7", *TINY]
    random_teachers.main(args)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0:3] for line in out[:2]] == [["random", "0", "4-7"], ["random", "1", "4-7"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["random0-4to7.json", "random1-4to7.json"]
    for seed in (0, 1):
        record = json.loads((tmp_path / f"random{seed}-4to7.json").read_text())
        data = load_planted_values(f"random:{seed}:4-7", weight_scale=1.0, **DATA)
        cell = random_teacher(seed, record["draws"] - 1, (4, 7)).cell
        assert record["spec"] == f"random:{seed}:4-7" and record["draws"] == data.draws and data.cell == cell
        assert record["nodes"] == len(cell.output.internal_nodes()) and 4 <= record["nodes"] <= 7
        assert record["complexity"] == complexity(from_cell(cell, data.layout))
        assert record["config"] == {"weight_scale": 1.0, "epochs": 1, "restarts": 1, "seed": 0, "data_seed": 0,
                                    "sizes": DATA}
        assert record["evaluator"]["data"]["teacher"] == f"random:{seed}:4-7" and "torch" in record["versions"]
        h = run_cell(data.cell, data.params, data.inputs["val"])["h"]
        assert record["states"] == {"std": h.std(), "max_abs": np.abs(h).max(), "steps": [1, 2, 4],
                                    "sensitivity": random_teachers.sensitivity(data, (1, 2, 4))}
        fits = record["fits"]
        assert fits["teacher"]["complexity"] == record["complexity"] and fits["gru"]["complexity"] == 14
        assert record["ratio"] == fits["teacher"]["val_mse"] / fits["gru"]["val_mse"]
    first = (tmp_path / "random0-4to7.json").read_bytes()
    (tmp_path / "random1-4to7.json").unlink()
    random_teachers.main(args)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "random:0:4-7: done" and out[1].startswith("random:1:4-7: ratio ")
    assert (tmp_path / "random0-4to7.json").read_bytes() == first and (tmp_path / "random1-4to7.json").exists()
    with pytest.raises(SystemExit) as stop:
        random_teachers.main([*args, "--epochs", "2"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert "random0-4to7.json was screened with other settings (epochs)" in err


def test_the_sensitivity_is_the_derivative_along_a_unit_change_of_the_first_input():
    """For the tanh RNN ``h_t = tanh(W x_t + U h_(t-1) + b)`` it is the mean norm of the exact
    product of the Jacobian ``dh_t/dx_1`` with a unit vector per sequence (drawn from seed 0):
    ``(1 - h_1^2) * (W d)``, then ``(1 - h_t^2) * (U dh_(t-1))``. It is zero for a teacher whose
    state never reads x_1 (``random:0:4-7``'s first node multiplies h_0 = 0, so h_1 = tanh(b)),
    and a smaller weight scale makes the teacher forget x_1 faster."""
    data = load_planted_values("rnn", weight_scale=1.0, **DATA)
    W, U, _ = data.params[0]
    x = data.inputs["val"]
    d = np.random.default_rng(0).standard_normal(x[:, 0].shape)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    h = run_cell(data.cell, data.params, x)["h"]
    jvp, exact = d @ W.T, []
    for t in range(x.shape[1]):
        jvp = (1 - h[:, t] ** 2) * (jvp if t == 0 else jvp @ U.T)
        exact.append(np.linalg.norm(jvp, axis=1).mean())
    steps = (1, 2, 4)
    assert np.allclose(random_teachers.sensitivity(data, steps), [exact[t - 1] for t in steps], rtol=1e-4)
    assert all(s > 0 for s in exact)
    blind = load_planted_values("random:0:4-7", weight_scale=1.0, **DATA)
    assert random_teachers.sensitivity(blind, steps) == [0.0, 0.0, 0.0]
    calm = load_planted_values("rnn", weight_scale=0.1, **DATA)
    decay = [s[-1] / s[0] for s in (random_teachers.sensitivity(d, steps) for d in (calm, data))]
    assert decay[0] < decay[1]


def _record(spec, ratio, nodes=5, error=None):
    """A screening record as :func:`random_teachers.screen_one` writes it."""
    if error:
        return {"spec": spec, "config": {}, "error": error}
    return {"spec": spec, "config": {"weight_scale": 1.0, "data_seed": 0, "sizes": {"n_train": 50, "seq_len": 4}},
            "nodes": nodes, "complexity": 2 * nodes, "draws": 1, "ratio": ratio,
            "states": {"std": 0.5, "max_abs": 2.0, "steps": [1, 5, 10], "sensitivity": [1.0, 0.25, 0.0625]},
            "fits": {"teacher": {"val_mse": ratio * 0.1}, "gru": {"val_mse": 0.1}}}


def test_the_table_has_a_row_per_teacher_and_counts_the_candidates(tmp_path):
    teachers = random_teachers.specs(4, (4, 7))
    assert teachers == ["random:0:4-7", "random:1:4-7", "random:2:4-7", "random:3:4-7"]
    assert random_teachers.specs(2) == ["random:0", "random:1"]
    found = [_record("random:0:4-7", 0.5), _record("random:1:4-7", 0.01),
             _record("random:2:4-7", None, error="planted teacher random:2:4-7: state h is not finite"),
             _record("random:3:4-7", 0.1)]
    for record in found:
        (tmp_path / f"{teacher_folder(record['spec'])}.json").write_text(json.dumps(record))
    lines = random_teachers.table(tmp_path, teachers, 10.0).splitlines()
    assert lines[0].split() == ["teacher", "nodes", "cplx", "draws", "h", "std", "max|h|", "s_1", "s_T/2", "s_T",
                                "own", "mse", "GRU", "mse", "ratio", "identify"]
    assert lines[1].split() == ["random:0:4-7", "5", "10", "1", "0.5", "2", "1", "0.25", "0.0625", "0.05", "0.1",
                                "0.5", "-"]
    assert lines[3] == "random:2:4-7       error: planted teacher random:2:4-7: state h is not finite"
    assert lines[-1] == "4 drawn, 3 finite, 2 whose own structure beats the GRU by 10x (ratio <= 0.1)"
    assert [r["spec"] for r in random_teachers.candidates(random_teachers.records(tmp_path, teachers), 10.0)] == [
        "random:1:4-7", "random:3:4-7"]
    assert random_teachers.table(tmp_path, teachers[:1], 1.0).splitlines()[-1].startswith("1 drawn, 1 finite, 1 ")
    (name, args, budget), = random_teachers.identify_runs(random_teachers.records(tmp_path, teachers), 1, 10.0)
    assert (name, budget) == ("identify-random1-4to7", None)
    assert args == ["--teacher", "random:1:4-7", "--identify", "--fidelity", "20,60", "--limit", "40",
                    "--weight-scale", "1", "--data-seed", "0", "--n-train", "50", "--seq-len", "4"]


def test_the_best_candidates_identifiability_is_checked_and_shown(tmp_path, capsys):
    args = ["--records", str(tmp_path), "--seeds", "2", "--sizes", "2-3", *TINY, "--factor", "1e-9",
            "--identify", "1", "--identify-fidelity", "1", "--identify-limit", "1"]
    random_teachers.main(args)
    out = capsys.readouterr().out.splitlines()
    best = min((json.loads(p.read_text()) for p in tmp_path.glob("random*.json")), key=lambda r: r["ratio"])
    name = f"identify-{teacher_folder(best['spec'])}"
    assert f"{name}: exit 0" in out and (tmp_path / name / "identify.json").exists()
    stored = json.loads((tmp_path / name / "identify.json").read_text())
    assert stored["spec"]["data"]["teacher"] == best["spec"] and stored["spec"]["epochs"] == 1
    assert stored["spec"]["data"]["n_train"] == 50 and stored["spec"]["data"]["weight_scale"] == 1.0
    verdict = "PASS" if stored["verdict"]["passed"] else "FAIL"
    row = next(line for line in out if line.startswith(best["spec"] + " "))
    assert row.split()[-1] == verdict and out[-1].endswith(f"; 1 checked, {int(verdict == 'PASS')} PASS")
    random_teachers.main(args)
    assert f"{name}: done" in capsys.readouterr().out


def test_bad_sizes_are_one_line_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        random_teachers.main(["--records", str(tmp_path), "--sizes", "7-4"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err == "error: --sizes 7-4: sizes 7-4: need 1 <= LOW <= HIGH <= 15\n"


def test_minimal_teachers_are_screened_with_their_refusals_counted(tmp_path, capsys):
    """``--minimal`` screens ``minimal:S:LOW-HIGH``: each record holds the cells its draw refused,
    by kind, as :func:`refusals` counts them, and the table sums them."""
    random_teachers.main(["--records", str(tmp_path), "--seeds", "1", "--sizes", "4-7", "--minimal", *TINY])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("minimal:0:4-7: ratio ")
    record = json.loads((tmp_path / "minimal0-4to7.json").read_text())
    assert record["spec"] == "minimal:0:4-7" and record["draws"] > 1
    assert record["refused"] == refusals(random_spec("minimal:0:4-7"), record["draws"])
    assert sum(record["refused"].values()) == record["draws"] - 1
    counts = ", ".join(f"{n} {kind}" for kind, n in Counter(record["refused"]).most_common())
    assert out[-1] == f"cells refused by the filters before them: {record['draws'] - 1} ({counts})"
