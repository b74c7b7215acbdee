"""benchmarks/authors_witness.py without the authors' checkout: its shim list, its argument
checks and how it keeps what their code printed (the runs themselves need the checkout and
a TensorFlow environment: results/witness/ holds their records)."""

from __future__ import annotations

import pytest

from cellgraph.benchmarks.authors_witness import SHIMS, final_lines, main


def test_shims_are_listed_with_file_line_and_reason(capsys):
    assert main(["--shims"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SHIMS) >= 6
    for line, (file, number, what, why) in zip(lines, SHIMS):
        assert line == f"{file}:{number}: {what} ({why})" and file.endswith(".py") and number > 0


def test_a_folder_that_is_not_their_checkout_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([str(tmp_path), "gru"])
    assert "is not a checkout of matthewkennedy5/RRNN planB" in capsys.readouterr().err
    (tmp_path / "trainer.py").write_text("")
    (tmp_path / "keras_gru.py").write_text("")
    with pytest.raises(SystemExit):
        main([str(tmp_path), "gru", "--settings", "params"])
    assert "--settings params is not one of gru's: appendix, comment" in capsys.readouterr().err


def test_progress_bars_keep_their_last_state():
    printed = "Epoch 1/2\n\x1b[1m 1/9\x1b[0m loss 3.1\r\x1b[1m 9/9\x1b[0m loss 2.0 - val_loss 1.9\nval_loss: [40.1]\n"
    assert final_lines(printed) == "Epoch 1/2\n 9/9 loss 2.0 - val_loss 1.9\nval_loss: [40.1]\n"
