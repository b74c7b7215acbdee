"""``cellgraph collect``: a run's record, never its checkpoints."""

from __future__ import annotations

import json

from cellgraph.cli import main


def fake_run(folder, finished: bool = True):
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "last.pt").write_bytes(b"weights")
    (folder / "structures").mkdir()
    (folder / "structures" / "epoch_001.json").write_text("{}")
    for name in ("config.json", "env.json", "eval_test_soft.json") + (("final.json",) if finished else ()):
        (folder / name).write_text(json.dumps({"name": name}))
    (folder / "metrics.jsonl").write_text('{"epoch": 1}\n')
    return folder


def test_collect_copies_records_without_checkpoints(capsys, tmp_path):
    done = fake_run(tmp_path / "runs" / "a-s0")
    stopped = fake_run(tmp_path / "runs" / "a-s1", finished=False)
    into = tmp_path / "results"
    assert main(["collect", str(done), str(stopped), "--into", str(into), "--prefix", "w5k"]) == 0
    out, err = capsys.readouterr()
    record = into / "w5k-a-s0"
    assert out.split() == [str(record)]
    assert "skipping" in err and "a-s1" in err
    assert sorted(p.relative_to(record).as_posix() for p in record.rglob("*")) == [
        "config.json", "env.json", "eval_test_soft.json", "final.json", "metrics.jsonl",
        "structures", "structures/epoch_001.json"]
    assert main(["collect", str(stopped), "--into", str(into), "--unfinished"]) == 0
    assert (into / "a-s1" / "metrics.jsonl").is_file() and not (into / "a-s1" / "final.json").exists()


def test_collect_refuses_a_folder_that_holds_no_run(capsys, tmp_path):
    assert main(["collect", str(tmp_path), "--into", str(tmp_path / "out")]) != 0
    assert "not a run folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_collect_keeps_a_stopped_run_and_forgets_it_once_resumed(tmp_path):
    """``stopped.json`` is part of a record; once the run is resumed (the file gone), a new
    collect removes it from the copy too."""
    run = fake_run(tmp_path / "runs" / "a-s0", finished=False)
    (run / "stopped.json").write_text(json.dumps({"epoch": 2}))
    into = tmp_path / "results"
    assert main(["collect", str(run), "--into", str(into), "--unfinished"]) == 0
    assert json.loads((into / "a-s0" / "stopped.json").read_text()) == {"epoch": 2}
    (run / "stopped.json").unlink()
    (run / "final.json").write_text("{}")
    assert main(["collect", str(run), "--into", str(into)]) == 0
    assert not (into / "a-s0" / "stopped.json").exists() and (into / "a-s0" / "final.json").is_file()
