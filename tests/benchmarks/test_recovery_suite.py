"""The recovery suite end to end on a tiny budget: it runs, keeps records, resumes and prints its table."""

import json
import math

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
    sized = recovery.runs(("random:4:4-7",), ("tpe",), 1, 7, identify=True)
    assert [name for name, _, _ in sized] == ["identify-random4-4to7", "random4-4to7-tpe-s0"]
    assert sized[1][1][:2] == ["--teacher", "random:4:4-7"]


def test_the_gru_seeded_arm_starts_evolution_at_the_gru_and_is_tabled_apart():
    (name, args, _), = recovery.runs(("mgu",), ("gru-seeded",), 1, 5)
    assert name == "mgu-gru-seeded-s0"
    assert args[:6] == ["--teacher", "mgu", "--strategy", "evolution", "--seed-target", "gru"]
    assert recovery.arm({"strategy": "evolution", "seed_target": ["gru"]}) == "gru-seeded"
    assert recovery.arm({"strategy": "evolution", "seed_target": []}) == "evolution"
    assert recovery.arm({"strategy": "random", "seed_target": []}) == "random"
    assert recovery.arm({"strategy": "local", "motifs": True, "seed_target": ["rnn"]}) == "rnn-motifs"
    assert recovery.arm({"strategy": "local", "motifs": True, "first_improvement": True,
                         "seed_target": ["rnn"]}) == "rnn-motifs-first"
    assert recovery.arm({"strategy": "evolution", "motifs": True, "seed_target": []}) == "evolution-motifs"
    assert recovery.arm({"strategy": "local", "motifs": True, "seed_target": []}) == "local"  # no such arm


def test_the_tpe_arm_runs_tpe_cold_and_is_tabled_as_tpe():
    (name, args, _), = recovery.runs(("mut1",), ("tpe",), 1, 5)
    assert name == "mut1-tpe-s0" and args[:4] == ["--teacher", "mut1", "--strategy", "tpe"]
    assert "--seed-target" not in args
    assert recovery.arm({"strategy": "tpe", "motifs": False, "seed_target": []}) == "tpe"


def test_the_enumerate_arm_runs_the_enumeration_cold_and_is_tabled_as_enumerate():
    (name, args, _), = recovery.runs(("minimal:0:2-3",), ("enumerate",), 1, 5)
    assert name == "minimal0-2to3-enumerate-s0" and args[:4] == ["--teacher", "minimal:0:2-3", "--strategy", "enumerate"]
    assert recovery.arm({"strategy": "enumerate", "nodes": 2, "seed_target": []}) == "enumerate"
    (name, args, _), = recovery.runs(("minimal:1:2-3",), ("enumerate-grow",), 1, 5)
    assert name == "minimal1-2to3-enumerate-grow-s0" and "--grow" in args
    assert recovery.arm({"strategy": "enumerate", "grow": True, "seed_target": []}) == "enumerate-grow"
    for strategy, grow, name in (("random", False, "random-screen"), ("enumerate", False, "enumerate-screen"),
                                 ("enumerate", True, "enumerate-grow-screen")):
        assert recovery.arm({"strategy": strategy, "grow": grow, "screen": 3, "seed_target": []}) == name
        (run, args, _), = recovery.runs(("minimal:0:2-3",), (name,), 1, 5)
        assert run == f"minimal0-2to3-{name}-s0" and "--screen" in args
    assert recovery.arm({"strategy": "enumerate", "expand": True, "screen": 3,
                         "seed_target": []}) == "enumerate-expand-screen"
    (_, args, _), = recovery.runs(("minimal:1:2-3",), ("enumerate-expand-screen",), 1, 5)
    assert "--expand" in args and "--grow" not in args
    assert recovery.arm({"strategy": "enumerate", "expand": True, "screen": 3, "probes": 1,
                         "seed_target": []}) == "enumerate-expand-probe-screen"
    (_, args, _), = recovery.runs(("minimal:1:2-3",), ("enumerate-expand-probe-screen",), 1, 5,
                                  ("--fidelity", "1,5,20"))
    assert args[args.index("--probes") + 1] == "1" and "--fidelity" in args
    for name, extra in (("enumerate-screen-intensify", {}), ("enumerate-expand-screen-intensify", {"expand": True}),
                        ("enumerate-expand-probe-screen-intensify", {"expand": True, "probes": 1}),
                        ("enumerate-expand2-all-probe-screen-intensify",
                         {"expand": True, "depth": 2, "all_rungs": True, "probes": 1})):
        assert recovery.arm({"strategy": "enumerate", "screen": 3, "intensify": 3, "seed_target": [], **extra}) == name
        (_, args, _), = recovery.runs(("minimal:1:2-3",), (name,), 1, 5)
        assert args[args.index("--intensify") + 1] == "3"
    assert recovery.arm({"strategy": "enumerate", "screen": 3, "intensify": 1, "seed_target": []}) == "enumerate-screen"
    assert recovery.arm({"strategy": "enumerate", "expand": True, "depth": 2, "screen": 3, "probes": 1,
                         "seed_target": []}) == "enumerate-expand2-probe-screen"
    (_, args, _), = recovery.runs(("minimal:25:4-7",), ("enumerate-expand2-probe-screen",), 1, 5)
    assert args[args.index("--depth") + 1] == "2" and "--expand" in args
    assert recovery.arm({"strategy": "enumerate", "expand": True, "depth": 2, "all_rungs": True, "screen": 3,
                         "probes": 1, "seed_target": []}) == "enumerate-expand2-all-probe-screen"
    (_, args, _), = recovery.runs(("minimal:25:4-7",), ("enumerate-expand2-all-probe-screen",), 1, 5)
    assert "--all-rungs" in args and args[args.index("--depth") + 1] == "2"
    for name, extra in (("enumerate-expand-probe-screen-lean", {}),
                        ("enumerate-expand2-all-probe-screen-lean", {"depth": 2, "all_rungs": True})):
        assert recovery.arm({"strategy": "enumerate", "expand": True, "probe_parents_only": True, "screen": 3,
                             "probes": 1, "seed_target": [], **extra}) == name
        (_, args, _), = recovery.runs(("minimal:1:2-3",), (name,), 1, 5)
        assert "--probe-parents-only" in args
    for name, extra in (("enumerate-screen-absorb", {}), ("enumerate-expand-probe-screen-absorb",
                                                          {"expand": True, "probes": 1}),
                        ("enumerate-expand2-all-probe-screen-absorb",
                         {"expand": True, "depth": 2, "all_rungs": True, "probes": 1})):
        assert recovery.arm({"strategy": "enumerate", "screen": 3, "absorb": True, "seed_target": [], **extra}) == name
        (_, args, _), = recovery.runs(("minimal:5:2-3",), (name,), 1, 5)
        assert "--absorb" in args


def _write_check(folder, teacher, objectives, margin=0.1, finished=True, complexity=None):
    """An ``identify.json`` as ``cellgraph discover --identify`` writes it: rows named and scored
    by ``objectives`` (teacher first; ``val_mse`` the objective, ``complexity`` from
    ``complexity`` by name, default 10), the verdict of :class:`Identification` on them."""
    from cellgraph.discover.identify import Identification, Row

    sizes = complexity or {}
    rows = tuple(Row(name, f"hash-{name}", value, {"val_mse": value, "complexity": sizes.get(name, 10)}, {})
                 for name, value in objectives.items())
    stored = {"spec": {"data": {"teacher": teacher}, "epochs": 1}, "rows": [vars(r) for r in rows]}
    if finished:
        stored["verdict"] = Identification(rows, margin).to_dict()
    (folder / f"identify-{teacher.replace(':', '')}").mkdir(parents=True)
    (folder / f"identify-{teacher.replace(':', '')}" / "identify.json").write_text(json.dumps(stored))


def test_the_identify_table_has_a_row_per_finished_check_with_its_columns(tmp_path, capsys):
    _write_check(tmp_path, "random:1", {"teacher": 0.5, "gru": 0.9, "remove n2 keep left x": 0.52,
                                        "op n3 add->mul": None}, margin=0.2)
    _write_check(tmp_path, "mgu", {"teacher": 0.01, "gru": 0.02, "activation n1 identity->tanh": 0.0125,
                                   "rewire n4 right h->n1": 0.3})
    _write_check(tmp_path, "gru", {"teacher": 0.02, "op n5 add->mul": 0.019})  # no GRU row: it is the teacher
    _write_check(tmp_path, "mut2", {"teacher": 0.01}, finished=False)  # still running: left out
    recovery.main(["--identify-table", "--records", str(tmp_path), "--root", str(tmp_path / "nowhere")])
    head, *lines = capsys.readouterr().out.splitlines()
    assert head.split()[:4] == ["teacher", "checked", "teacher", "obj"]
    assert [line.split()[0] for line in lines] == ["gru", "mgu", "random:1"]  # the targets' order, then others
    gru, mgu, random1 = lines
    assert mgu.split() == ["mgu", "4", "0.01", "activation", "n1", "identity->tanh", "0.0125", "0.02", "-",
                           "0.250", "PASS", "(margin", "0.1)"]
    assert random1.split() == ["random:1", "4", "0.5", "remove", "n2", "keep", "left", "x", "0.52", "0.9", "0.52",
                               "0.040", "FAIL", "(margin", "0.2)"]
    assert gru.split() == ["gru", "2", "0.02", "op", "n5", "add->mul", "0.019", "-", "-", "-0.050", "FAIL",
                           "(margin", "0.1)"]


def test_the_table_shows_each_targets_identifiability_verdict(tmp_path):
    _write_check(tmp_path, "mgu", {"teacher": 0.01, "gru": 0.02, "op n3 add->mul": 0.5})
    _write_check(tmp_path, "mut1", {"teacher": 0.01, "gru": 0.02, "op n3 add->mul": 0.0101})
    for target in ("mgu", "mut1", "mut3"):
        (tmp_path / f"{target}-local-s0").mkdir()
        (tmp_path / f"{target}-local-s0" / "discovery.json").write_text(json.dumps({
            "config": {"teacher": target, "strategy": "local", "seed_target": []}, "budget": 1,
            "result": {"target": None, "duplicates": 0, "proposed": None}, "best": []}))
    rows = recovery.summarize(tmp_path)
    assert {target: row["identifiable"] for (target, _), row in rows.items()} == {"mgu": "PASS", "mut1": "FAIL", "mut3": "-"}
    assert {row["unseeded"] for row in rows.values()} == {None}  # the table's "-": the arm seeds from no run


def test_a_target_whose_run_found_another_structure_as_good_is_tied_whatever_its_check_said(tmp_path):
    _write_check(tmp_path, "minimal:19:2-3", {"teacher": 0.01, "gru": 0.02, "op n3 add->mul": 0.5})
    cells = {"twin": (1.2e-5, False), "teacher": (1.2e-5, True), "other": (2e-5, False)}
    for seed, order in enumerate((("teacher", "other"), ("twin", "teacher", "other"))):
        found = {"config": {"teacher": "minimal:19:2-3", "strategy": "enumerate", "seed_target": []}, "budget": 1,
                 "result": {"target": None, "duplicates": 0, "proposed": None},
                 "best": [{"objective": cells[name][0], "recovers": cells[name][1]} for name in order]}
        assert recovery.tied(found) == (seed == 1)
        (tmp_path / f"minimal19-2to3-enumerate-s{seed}").mkdir()
        (tmp_path / f"minimal19-2to3-enumerate-s{seed}" / "discovery.json").write_text(json.dumps(found))
    (row,) = recovery.summarize(tmp_path).values()
    assert row["identifiable"] == "TIED"
    assert not recovery.tied({"best": [{"objective": 1e-5, "recovers": False}]})  # the teacher was not kept
    better = [{"objective": 1.0e-5, "recovers": False}, {"objective": 1.2e-5, "recovers": True}]
    assert not recovery.tied({"best": better})  # a better rival is a miss, not a tie


def test_the_identify_table_rescores_the_rows_under_another_penalty(tmp_path, capsys):
    """val_mse 0.010 at complexity 10 against a rival's 0.0105 at 9: the teacher passes at
    margin 0 as recorded, and loses once each unit of complexity costs exp(0.1) (relative 0.1)."""
    _write_check(tmp_path, "mgu", {"teacher": 0.010, "gru": 0.02, "op n3 add->mul": 0.0105}, margin=0.0,
                 complexity={"teacher": 10, "gru": 14, "op n3 add->mul": 9})
    args = ["--identify-table", "--records", str(tmp_path), "--root", str(tmp_path / "nowhere")]
    recovery.main(args)
    assert capsys.readouterr().out.splitlines()[1].split()[-3:] == ["PASS", "(margin", "0)"]
    recovery.main([*args, "--rescore", "relative", "0.1"])
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[2] == f"{0.010 * math.exp(1.0):.4g}" and row[-3] == "FAIL"
    _write_check(tmp_path, "mut1", {"teacher": 0.01, "remove n1 keep left x": 0.2, "remove n2 keep left h": 0.1},
                 complexity={"teacher": 10, "remove n1 keep left x": 3, "remove n2 keep left h": 9})
    recovery.main([*args, "--rescore", "relative", "0.1"])  # the best removal is rescored too
    assert capsys.readouterr().out.splitlines()[2].split()[-5] == f"{min(0.2 * math.exp(0.3), 0.1 * math.exp(0.9)):.4g}"
    recovery.main([*args, "--rescore", "absolute", "0.0"])
    assert capsys.readouterr().out.splitlines()[1].split()[-3] == "PASS"
    recovery.main([*args, "--rescore", "relative", "0.001"])
    assert capsys.readouterr().out.splitlines()[1].split()[-3] == "PASS"
    # both under a floor of 0.02: equal errors, so the rival's one unit of complexity less wins
    recovery.main([*args, "--rescore", "relative", "0.001", "--rescore-floor", "0.02"])
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[2] == f"{0.02 * math.exp(0.01):.4g}" and row[-3] == "FAIL"


def test_the_rrnn_seeded_arm_seeds_local_search_from_the_small_paper_rrnn_of_its_target_and_seed(tmp_path):
    from cellgraph.experiment.config import parse_set, resolve_config

    made = recovery.runs(("mgu",), ("rrnn-seeded",), 2, 5, root=tmp_path)
    assert [name for name, _, _ in made] == ["mgu-rrnn-seeded-s0", "mgu-rrnn-seeded-s1"]
    assert made[1][1] == ["--teacher", "mgu", "--strategy", "local", "--motifs", "--seed-run",
                          str(tmp_path / "mgu-rrnn-s1"), "--seed", "1", "--budget", "5"]
    trained = recovery.rrnn_runs(("mgu", "random:2"), ("random", "rrnn-seeded"), 2)
    assert [name for name, _ in trained] == ["mgu-rrnn-s0", "mgu-rrnn-s1", "random2-rrnn-s0", "random2-rrnn-s1"]
    assert recovery.rrnn_runs(("mgu",), ("random", "rnn-motifs"), 2) == []
    args = trained[3][1]
    assert args[:4] == ["--task", "planted", "--model", "rrnn"] and args[4:6] == ["--set", "planted_teacher=random:2"]
    # cellgraph train would start rrnn from the discovery recipe (the GRU); the arm trains the paper's RRNN
    config = resolve_config(overrides={"task": "planted", "model": "rrnn", **parse_set(args[5::2])}, recipe=True)
    assert (config.mode, config.warm_start, config.structure_term, config.seed) == ("soft", "none", False, 1)
    assert (config.epochs, config.hidden_size, config.num_threads, config.max_train) == (4, 16, 1, 256)
    assert recovery.arm({"strategy": "local", "motifs": True, "seed_target": [], "seed_run": "x"}) == "rrnn-seeded"
    assert recovery.arm({"strategy": "local", "motifs": False, "seed_target": [], "seed_run": "x"}) == "local"


def test_the_rrnn_seeded_arm_end_to_end_and_a_run_that_gives_no_seed_is_tabled_as_such(tmp_path, capsys):
    """Finished RRNN runs are kept (never retrained): seed 0's has a candidate, seed 1's none."""
    from cellgraph.cell.expr import Node, h, x, zero
    from tests.discover.cells import logged_form, structure_run

    root, records = tmp_path / "runs", tmp_path / "records"
    chain = Node("add", "identity", 3, x, Node("add", "identity", 3, x, h))
    structure_run(root / "mgu-rrnn-s0", [logged_form(chain, 5)])
    structure_run(root / "mgu-rrnn-s1", [logged_form(Node("add", "identity", 3, zero, h), 9)])
    args = ["--root", str(root), "--records", str(records), "--targets", "mgu", "--strategies", "rrnn-seeded",
            "--seeds", "2", "--budget", "1", "--", *TINY]
    recovery.main(args)
    out = capsys.readouterr().out
    assert "mgu-rrnn-s0: done" in out and "mgu-rrnn-s1: done" in out
    assert "mgu-rrnn-seeded-s0: exit 0" in out and "mgu-rrnn-seeded-s1: exit 2" in out
    assert "none of its 1 most frequent forms is a candidate" in (root / "mgu-rrnn-seeded-s1.log").read_text()
    assert (records / "mgu-rrnn-seeded-s1" / "seeds.json").exists()  # the failure's record is kept
    assert json.loads((records / "mgu-rrnn-seeded-s0" / "seeds.json").read_text())["seed_run"]["kept"] == 1
    rows = {row.split()[1]: row.split() for row in out.splitlines() if row.startswith("mgu ")}
    assert rows["rrnn-seeded"][2] == "0/2" and rows["rrnn-seeded"][-3:] == ["1", "1", "-"]  # no seed 1, budget 1
    assert rows["rrnn-seeded"][3:5] == ["-", "-"] and rows["rrnn-seeded"][5] != "-"  # no recovery; a best objective
    recovery.main(args)
    out = capsys.readouterr().out
    assert "mgu-rrnn-seeded-s0: done" in out and "mgu-rrnn-seeded-s1: done" in out  # the failure has ended
