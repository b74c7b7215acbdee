"""The recovery suite end to end on a tiny budget: it runs, keeps records, resumes and prints its table."""

import json

import pytest

from cellgraph.benchmarks import recovery

pytest.importorskip("torch")
pytest.importorskip("optuna")
TINY = ["--n-train", "50", "--n-val", "20", "--n-test", "20", "--seq-len", "4", "--p", "4", "--n-out", "2",
        "--epochs", "1", "--restarts", "1", "--population", "2", "--sample", "1"]


def test_the_suite_runs_keeps_records_resumes_and_tabulates(tmp_path, capsys):
    root, records = tmp_path / "runs", tmp_path / "records"
    args = ["--root", str(root), "--records", str(records), "--targets", "mgu", "--strategies", "evolution",
            "--seeds", "2", "--budget", "1", "--", *TINY, "--seed-target", "mgu"]
    recovery.main(args)
    out = capsys.readouterr().out
    assert "mgu-evolution-s0: exit 0" in out and "mgu-evolution-s1: exit 0" in out
    kept = sorted(p.relative_to(records).as_posix() for p in records.rglob("*") if p.is_file())
    assert "mgu-evolution-s0/discovery.json" in kept and not any(k.endswith(".db") for k in kept)
    assert (root / "mgu-evolution-s0" / "study.db").exists()
    line = next(row for row in out.splitlines() if row.startswith("mgu "))
    # one evaluation: the seed (the teacher) is trial 0 and the search's best, so recovered after 1.0
    assert line.split()[:3] == ["mgu", "evolution", "2/2"] and line.split()[3] == "1.0"
    assert line.split()[-1] == "-" and line.split()[-2] == "1"  # no identifiability check ran; budget 1
    (root / "mgu-evolution-s1" / "discovery.json").unlink()
    recovery.main(args)
    out = capsys.readouterr().out
    assert "mgu-evolution-s0: done" in out and "mgu-evolution-s1: exit 0" in out
    assert json.loads((root / "mgu-evolution-s1" / "discovery.json").read_text())["result"]["trials"] == 1
    recovery.main(["--table", "--records", str(records), "--root", str(tmp_path / "nowhere")])
    assert capsys.readouterr().out.splitlines()[1] == line


def test_runs_name_each_command_and_pass_the_extra_flags():
    made = recovery.runs(("random:3",), ("random",), 2, 7, ("--epochs", "2"), identify=True, identify_limit=5)
    assert [name for name, _, _ in made] == ["identify-random3", "random3-random-s0", "random3-random-s1"]
    assert made[0][1] == ["--teacher", "random:3", "--identify", "--limit", "5", "--epochs", "2"] and made[0][2] is None
    assert made[2][1][-4:] == ["--budget", "7", "--epochs", "2"] and made[2][2] == 7


def test_the_gru_seeded_arm_starts_evolution_at_the_gru_and_is_tabled_apart():
    (name, args, _), = recovery.runs(("mgu",), ("gru-seeded",), 1, 5)
    assert name == "mgu-gru-seeded-s0"
    assert args[:6] == ["--teacher", "mgu", "--strategy", "evolution", "--seed-target", "gru"]
    assert recovery.arm({"strategy": "evolution", "seed_target": ["gru"]}) == "gru-seeded"
    assert recovery.arm({"strategy": "evolution", "seed_target": []}) == "evolution"
    assert recovery.arm({"strategy": "random", "seed_target": []}) == "random"
    assert recovery.arm({"strategy": "local", "motifs": True, "seed_target": ["rnn"]}) == "rnn-motifs"
    assert recovery.arm({"strategy": "evolution", "motifs": True, "seed_target": []}) == "evolution-motifs"
    assert recovery.arm({"strategy": "local", "motifs": True, "seed_target": []}) == "local"  # no such arm
