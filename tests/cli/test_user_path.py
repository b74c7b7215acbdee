"""The user's path through the CLI: what `cellgraph train` needs and prints, presets, Ctrl-C,
a missing torch, a bad --data, and the clear one-line errors of bench, render and config."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

import cellgraph
from cellgraph.backends.torch.training.checkpoint import load_checkpoint
from cellgraph.cli import main
from cellgraph.experiment.config import TrainConfig
from cellgraph.experiment.presets import PRESETS
from cellgraph.experiment.runs import RunDir

TINY = {"hidden_size": 8, "n_iterations": 3, "scoring_hidden": 8, "max_train": 32, "max_eval": 16,
        "seq_len": 5, "epochs": 1, "batch_size": 16, "log_structures": 4, "num_threads": 1}
QUIET = {**os.environ, "CELLGRAPH_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}


def sets(**changes) -> list[str]:
    return [arg for key, value in {**TINY, **changes}.items() for arg in ("--set", f"{key}={value}")]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- task and model, the resolved settings, presets ---------------------------------------


@pytest.mark.parametrize("given, missing", [((), "task and model not given"),
                                            (("--model", "gru"), "task not given"),
                                            (("--task", "sst"), "model not given")])
def test_train_needs_task_and_model(capsys, tmp_path, given, missing):
    code, _, err = cli(capsys, "train", *given, "--out", str(tmp_path / "run"))
    assert code == 2 and f"error: {missing}: name" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_preset_or_config_file_gives_task_and_model(capsys, tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('task = "planted"\nmodel = "gru"\n')
    code, out, _ = cli(capsys, "train", "--config", str(toml), *sets(), "--out", str(tmp_path / "a"))
    assert code == 0 and out.startswith("settings: task=planted model=gru seed=0 epochs=1 ")


def test_train_prints_the_resolved_settings_first(capsys, tmp_path):
    run = tmp_path / "run"
    code, out, _ = cli(capsys, "train", "--task", "planted", "--model", "gru", *sets(lr=0.01),
                       "--out", str(run))
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("settings: task=planted model=gru seed=0 epochs=1 ")
    assert "lr=0.01" in lines[0] and "clip=" not in lines[0]  # only what differs from the defaults
    assert lines[1].startswith("epoch 1/1")
    code, out, _ = cli(capsys, "train", "--resume", str(run))
    assert code == 0 and out.splitlines()[0] == lines[0]


def test_preset_for_another_task_warns_once(capsys, tmp_path):
    typo = str(tmp_path / "no-data")
    code, _, err = cli(capsys, "train", "--preset", "paper-wiki10k-gru", "--task", "sst", "--data", typo,
                       "--out", str(tmp_path / "run"))
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert code == 2 and len(warnings) == 1
    assert "preset paper-wiki10k-gru is tuned for task wiki, not sst" in warnings[0]
    code, _, err = cli(capsys, "train", "--preset", "paper-wiki10k-gru", "--data", typo,
                       "--out", str(tmp_path / "r"))
    assert code == 2 and "warning" not in err


def test_presets_command_and_alias_list_every_preset(capsys):
    code, out, _ = cli(capsys, "presets")
    assert code == 0
    for name, settings in PRESETS.items():
        assert f"{name}\n  " + " ".join(f"{k}={v}" for k, v in settings.items()) + "\n" in out
    assert cli(capsys, "train", "--list-presets")[1] == out


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"cellgraph {cellgraph.__version__}\n"


def test_train_help_lists_every_setting(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # help text is wrapped
    for item in dataclasses.fields(TrainConfig):
        help_text = item.metadata["help"]
        assert help_text and len(help_text) < 200, item.name
        rule = item.metadata["rule"]
        head = f"{item.name}: {type(item.default).__name__}, default {item.default!r}"
        assert head + (f", {rule.text}" if rule else "") + f" {help_text}" in text


# --- Ctrl-C ---------------------------------------------------------------------------------


def _interrupt(argv: list[str], ready, background: bool = False) -> tuple[int, str]:
    """Start ``argv``, stop it once ``ready(stdout line)`` says so; exit code, stderr. Ctrl-C
    (SIGINT) by default, the child started as a shell's foreground starts it (SIGINT's default
    action, whatever the tests inherited); ``background``: started as a shell starts ``CMD &``
    (SIGINT ignored) and stopped by ``kill`` (SIGTERM)."""
    sigint = signal.SIG_IGN if background else signal.SIG_DFL
    proc = subprocess.Popen(argv, env={**QUIET, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    for line in proc.stdout:
        if ready(line):
            break
    proc.send_signal(signal.SIGTERM if background else signal.SIGINT)
    return proc.wait(timeout=120), proc.stderr.read()


def test_ctrl_c_stops_with_one_line_and_the_resume_command(tmp_path):
    """A real `cellgraph train` receives SIGINT after its first checkpoint: exit code 130, one
    line naming the exact resume command, intact checkpoints; that command resumes the run
    (and stops the same way)."""
    run = tmp_path / "run"
    last = run / "checkpoints" / "last.pt"
    resume = f"cellgraph train --resume {shlex.quote(str(run))}"
    line = f"cellgraph train: interrupted; to continue it: {resume}"
    code, err = _interrupt([sys.executable, "-m", "cellgraph", "train", "--task", "planted", "--model",
                            "rrnn-gru", *sets(epochs=500, patience=0, warm_start="none"), "--out", str(run)],
                           lambda out: out.startswith("epoch 2/"))  # the checkpoint of epoch 1 is written
    assert code == 130 and err.splitlines() == [line]
    epoch = load_checkpoint(last)["epoch"]
    assert epoch >= 1 and not list(run.rglob("*.tmp")) and not (run / "final.json").exists()
    code, err = _interrupt([sys.executable, "-m", "cellgraph", *shlex.split(resume)[1:]],
                           lambda out: out.startswith(f"resuming {run} after epoch {epoch}"))
    assert code == 130 and err.splitlines() == [line]
    assert load_checkpoint(last)["epoch"] >= epoch


def test_kill_stops_a_run_started_in_the_background_as_ctrl_c_does(tmp_path):
    """``cellgraph train ... &`` ignores SIGINT; ``kill`` (SIGTERM) stops it at a safe point
    with the same line as Ctrl-C and an intact checkpoint."""
    run = tmp_path / "run"
    code, err = _interrupt([sys.executable, "-m", "cellgraph", "train", "--task", "planted", "--model", "gru",
                            *sets(epochs=500, patience=0), "--out", str(run)],
                           lambda out: out.startswith("epoch 2/"), background=True)
    assert code == 130 and err.splitlines() == [
        f"cellgraph train: interrupted; to continue it: cellgraph train --resume {shlex.quote(str(run))}"]
    assert load_checkpoint(run / "checkpoints" / "last.pt")["epoch"] >= 1 and not list(run.rglob("*.tmp"))


def test_ctrl_c_before_the_run_folder_exists_says_so(tmp_path, monkeypatch, capsys):
    from cellgraph.backends.torch.runs import train as torch_train

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch_train, "load_data", interrupted)
    code, _, err = cli(capsys, "train", "--task", "planted", "--model", "gru", "--out", str(tmp_path / "run"))
    assert code == 130 and err == "cellgraph train: interrupted before anything was written\n"


# --- a missing torch ------------------------------------------------------------------------

#: Runs ``cellgraph.cli.main`` on each argv (JSON, from argv[1]) with ``import torch`` blocked,
#: as in an install without torch; prints ``[code, stderr]`` per argv as JSON.
NO_TORCH = r"""
import contextlib, io, json, sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoTorch())
from cellgraph.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    results.append([code, err.getvalue()])
print(json.dumps(results))
"""


def test_missing_torch_is_one_line_naming_the_install(tmp_path):
    made = tmp_path / "made"  # a run folder to read: its checks come before torch is needed
    RunDir.create(made).write_config(TrainConfig(task="planted", model="rrnn").to_dict())
    commands = [["train", "--task", "planted", "--model", "gru", "--out", str(tmp_path / "run")],
                ["eval", str(made)], ["bench", "--quick"],
                ["demo", "--quick", "-o", str(tmp_path / "d")],
                ["export", str(made), "--sample", "0", "--t", "0", "--format", "json"],
                ["prove", "--only", "vanishing"],
                ["tune", "--task", "planted", "--model", "gru", "--ranges", "sst", "--trials", "1",
                 "--dir", str(tmp_path / "s")]]
    done = subprocess.run([sys.executable, "-c", NO_TORCH, json.dumps(commands)], capture_output=True,
                          text=True, timeout=300, env=QUIET)
    assert done.returncode == 0, done.stderr
    for argv, (code, err) in zip(commands, json.loads(done.stdout)):
        assert code == 2 and err == (f"cellgraph {argv[0]}: error: this command needs torch, which is not "
                                     "installed: pip install torch==2.13.0\n"), argv
    assert not (tmp_path / "run").exists() and not (tmp_path / "s").exists()
    target = [["target", "gru", "--format", "sympy"]]
    no_torch = subprocess.run([sys.executable, "-c", NO_TORCH, json.dumps(target)], capture_output=True,
                              text=True, timeout=300, env=QUIET)
    assert json.loads(no_torch.stdout) == [[0, ""]]


# --- one clear line for bad input -----------------------------------------------------------


def test_bench_threads_must_be_positive(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bench", "--threads", "0"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --threads: expected an integer >= 1, got '0'" in err


def test_render_into_a_missing_folder_names_the_folder(capsys, tmp_path):
    doc = tmp_path / "gru.json"
    assert cli(capsys, "target", "gru", "--format", "json", "-o", str(doc))[0] == 0
    missing = tmp_path / "missing" / "dir"
    code, _, err = cli(capsys, "render", str(doc), "-o", str(missing / "out.dot"))
    assert code == 2 and err == (f"cellgraph render: error: cannot write {missing / 'out.dot'}: folder "
                                 f"{missing} does not exist\n")


# --- a bad --data ---------------------------------------------------------------------------


def test_bad_data_writes_nothing_and_the_same_out_then_works(capsys, tmp_path, small_data):
    run = tmp_path / "run"
    base = ["train", "--task", "sst", "--model", "gru", *sets(), "--out", str(run)]
    code, _, err = cli(capsys, *base, "--data", str(tmp_path / "typo"))
    assert code == 2 and "typo" in err and "does not exist" in err
    assert not run.exists()
    assert cli(capsys, *base, "--data", str(small_data))[0] == 0


def test_run_without_checkpoint_can_start_over_with_new_data(capsys, tmp_path, small_data):
    """A folder that holds a run's settings with a bad data folder and no checkpoint (an older
    version, or a run stopped in its first epoch) blocks nothing."""
    run = tmp_path / "run"
    settings = TrainConfig(task="sst", model="gru", data_dir=str(tmp_path / "typo"), **TINY)
    RunDir.create(run).write_config(settings.to_dict())
    code, _, err = cli(capsys, "train", "--task", "sst", "--model", "gru", "--out", str(run))
    assert code == 2 and "has no checkpoint yet, so nothing is lost by deleting it" in err
    assert f"cellgraph train --resume {run}" in err
    code, _, err = cli(capsys, "train", "--resume", str(run))
    assert code == 2 and "typo" in err and f"cellgraph train --resume {run} --data DIR" in err
    good = str(small_data)
    assert cli(capsys, "train", "--resume", str(run), "--data", good)[0] == 0
    assert json.loads((run / "config.json").read_text())["data_dir"] == good
    assert (run / "final.json").exists()
    # a run with checkpoints refuses inputs that change the model, but --data may say where this
    # machine keeps the same data (config.json records an absolute folder)
    code, _, err = cli(capsys, "train", "--resume", str(run), "--glove", str(tmp_path / "g.txt"))
    assert code == 2 and "it has checkpoints" in err and "drop --glove" in err
    assert cli(capsys, "train", "--resume", str(run), "--data", good)[0] == 0
