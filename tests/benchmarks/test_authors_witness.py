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


def test_the_table_is_the_mean_and_spread_of_the_records(tmp_path, capsys):
    import json

    for seed, (val, test) in enumerate([([2.9, 2.5, 2.6], 2.7), ([2.8, 2.4, 2.4], 2.5)]):
        record = {"model": "rrnn-gru", "settings": "appendix", "epochs": 3, "seed": seed, "val_bpc": val,
                  "test_bpc": test}
        (tmp_path / f"rrnn-gru-appendix-s{seed}.json").write_text(json.dumps(record))
    (tmp_path / "rrnn-gru-params-s0.json").write_text(json.dumps(
        {"model": "rrnn-gru", "settings": "params", "epochs": 2, "seed": 0, "val_bpc": [float("nan")] * 2,
         "test_bpc": 5e10}))
    assert main(["--table", "--out", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert rows == ["| rrnn-gru | appendix | 3 | 0, 1 | 2.500 ± 0.141 | 2.450 ± 0.071 | 2.600 ± 0.141 |",
                    "| rrnn-gru | params | 2 | 0 | not finite | not finite | 5e+10 |"]
