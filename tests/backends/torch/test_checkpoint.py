"""Atomic, verified, weights-only checkpoints with fallback to the previous good one."""

import os
import signal
from pathlib import Path

import pytest
import torch

from cellgraph.backends.torch.training.checkpoint import (
    CheckpointError, load_checkpoint, load_latest, save_checkpoint,
)


def test_round_trip_and_previous_kept(tmp_path):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"epoch": 1, "w": torch.ones(3)})
    save_checkpoint(path, {"epoch": 2, "w": torch.zeros(3)})
    assert load_checkpoint(path)["epoch"] == 2
    assert load_checkpoint(tmp_path / "last.prev.pt")["epoch"] == 1


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_checkpoint_falls_back(tmp_path, damage):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"epoch": 1, "w": torch.ones(100)})
    save_checkpoint(path, {"epoch": 2, "w": torch.zeros(100)})
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted or truncated"):
        load_checkpoint(path)
    messages = []
    assert load_latest(path, log=messages.append)["epoch"] == 1
    assert "falling back" in messages[0]


@pytest.mark.parametrize("damage", ["truncate", "empty", "flip"])
def test_damaged_checkpoint_without_sidecar_is_named_damaged(tmp_path, damage):
    path = tmp_path / "best.pt"
    save_checkpoint(path, {"epoch": 1, "w": torch.ones(100)})
    Path(f"{path}.sha256").unlink()
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "empty": b"", "flip": b"\x00" + data[1:]}[damage])
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert message.startswith(f"checkpoint {path} is corrupted or truncated (it has no checksum sidecar")
    assert "weights_only" not in message and "\n" not in message


def test_ctrl_c_while_saving_keeps_checkpoint_and_sidecar_together(tmp_path, monkeypatch, ctrl_c):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"epoch": 1})
    real = os.replace

    def interrupted(*args):  # Ctrl-C as the previous checkpoint is moved aside
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"epoch": 2})
    monkeypatch.undo()
    assert load_checkpoint(path)["epoch"] == 2 and load_checkpoint(tmp_path / "last.prev.pt")["epoch"] == 1


def test_checkpoint_cannot_run_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"x": Evil()}, path)
    with pytest.raises(CheckpointError, match="cannot be read: it holds an object other than tensors") as err:
        load_checkpoint(path)
    assert "weights_only" not in str(err.value)


def test_missing_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_latest(tmp_path / "none.pt")


def test_tensors_load_onto_the_device_asked_for(tmp_path):
    """``map_location`` reaches ``torch.load`` (still weights-only): a checkpoint loads onto
    another device than the one it was written on (here the meta device; a GPU checkpoint
    onto the CPU is the same mapping), the previous version too."""
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"epoch": 1, "model": {"w": torch.ones(3)}, "rng": torch.get_rng_state()})
    save_checkpoint(path, {"epoch": 2, "model": {"w": torch.zeros(3)}, "rng": torch.get_rng_state()})
    assert load_checkpoint(path)["model"]["w"].device.type == "cpu"
    state = load_checkpoint(path, map_location="meta")
    assert state["epoch"] == 2 and state["model"]["w"].is_meta and state["rng"].is_meta
    path.write_bytes(b"damaged")
    assert load_latest(path, log=lambda s: None, map_location="meta")["model"]["w"].is_meta
