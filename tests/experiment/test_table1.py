"""Table 1 beside the paper's (:mod:`cellgraph.experiment.table1`), from a records folder."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

from cellgraph.experiment.reproduce import PROTOCOL
from cellgraph.experiment.table1 import LOWER_BOUND, PAPER, cpu_seconds, reading_table, results_table, searches_table
from cellgraph.files import read_json

TABLE1 = Path(__file__).resolve().parents[2] / "results" / "table1"
HEADER = "job\tcommand\tcpu_s\twall_s\texit\n"


def records_with(tmp_path: Path, names: list[str], commands: str, source: Path = TABLE1) -> Path:
    """Copies of committed records (of ``source``) with ``commands``; their own ``final.json``
    CPU count is dropped, so that the CPU time comes from ``commands`` unless a test writes one."""
    records = tmp_path / "records"
    records.mkdir()
    for name in names:
        shutil.copytree(source / name, records / name)
        final = records / name / "final.json"
        final.write_text(json.dumps({k: v for k, v in read_json(final).items() if k != "cpu_seconds"}),
                         encoding="utf-8")
    (records / "commands.tsv").write_text(HEADER + commands, encoding="utf-8")
    return records


def test_cpu_seconds_add_up_the_commands_of_a_resumed_job(tmp_path):
    path = tmp_path / "commands.tsv"
    path.write_text(HEADER + "a/x-s0\tcellgraph train ...\t100\t300\t130\n"
                    "a/x-s0\tcellgraph train --resume ...\t50\t60\t0\nb/y-s0\tcellgraph train\t7\t8\t0\n")
    assert cpu_seconds(path) == {"a/x-s0": (150.0, 2), "b/y-s0": (7.0, 1)}
    assert cpu_seconds(tmp_path / "missing.tsv") == {}


def test_a_row_is_the_mean_and_sample_std_of_its_seeds_beside_the_paper(tmp_path):
    names = [f"wiki5k-preset-gru-s{s}" for s in range(3)]
    records = records_with(tmp_path, names, "".join(
        f"wiki5k/preset-gru-s{s}\tcellgraph train\t{cpu}\t1\t0\n" for s, cpu in enumerate((9, 10, 14))))
    finals = [read_json(records / name / "final.json") for name in names]
    lines = results_table(records).splitlines()
    assert len(lines) == 2 + 2 * sum(len(e.arms) for e in PROTOCOL if e.name != "planted")
    (row,) = [line for line in lines if "GRU | paper's preset | 2.73 / 2.68" in line]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4] == "val"  # no search: its one validation metric chose the checkpoint
    for cell, split in zip(cells[5:7], ("val", "test")):
        values = [f[f"{split}_bpc"] for f in finals]
        assert cell == f"{statistics.fmean(values):.3f} ± {statistics.stdev(values):.3f}"
    assert cells[7:] == ["—", "—", "0, 1, 2", "11"]
    assert LOWER_BOUND not in results_table(records)
    assert sum("not run yet" in line for line in lines) == len(lines) - 3
    assert PAPER[("sst", "rrnn-gru")] == (0.651, 0.687) and "| 0.651 / 0.687 |" in results_table(records)


def test_an_rrnn_row_says_which_search_chose_its_checkpoint(tmp_path):
    """The column "checkpoint by" is the runs' eval_mode: the hard search for these records,
    the soft one once their final.json says so."""
    names = [f"wiki-preset-rrnn-gru-s{s}" for s in range(3)]
    records = records_with(tmp_path, names, "", TABLE1.with_name("table1-argmax"))

    def chosen_by() -> str:
        (line,) = [line for line in results_table(records).splitlines() if "RRNN-GRU | paper's preset | 2.43 / 2.42" in line]
        return [c.strip() for c in line.strip("|").split("|")][4]

    assert chosen_by() == "val, hard"
    for name in names:
        final = records / name / "final.json"
        final.write_text(json.dumps({**read_json(final), "eval_mode": "soft"}), encoding="utf-8")
    assert chosen_by() == "val, soft"


def test_a_search_row_gives_the_searched_keys_of_its_best_trial(tmp_path):
    records = records_with(tmp_path, [], "sst/search-gru\tcellgraph search ...\t1234.4\t1300\t0\n")
    (records / "sst-search-gru").mkdir()
    (records / "sst-search-gru" / "best.toml").write_text(
        '# best trial\nmodel = "gru"\nbatch_size = 37\nlr = 0.0012345\nlambda_l2 = 2e-07\nclip = 5.5\n')
    (records / "sst-search-gru" / "sst-search-gru.log").write_text(
        "study sst-gru: 8 slots, 7 complete\n...\nstudy sst-gru: 8 slots, 8 complete; best val accuracy 0.5\n")
    (row,) = [line for line in searches_table(records).splitlines() if "SST" in line and "| GRU |" in line]
    assert row.endswith("| 8 | 1,234 | batch_size = 37, lr = 0.00123, lambda_l2 = 2e-07 |")  # clip: not searched


def test_a_stopped_run_is_listed_by_seed_not_averaged(tmp_path):
    records = records_with(tmp_path, [f"wiki5k-preset-gru-s{s}" for s in range(3)], "")
    (records / "wiki5k-preset-gru-s2" / "final.json").unlink()  # as if its loss had diverged
    (row,) = [line for line in results_table(records).splitlines() if "GRU | paper's preset | 2.73" in line]
    assert "| 0, 1; stopped: 2 | — |" in row
    finals = [read_json(records / f"wiki5k-preset-gru-s{s}" / "final.json")["test_bpc"] for s in (0, 1)]
    assert f"| {statistics.fmean(finals):.3f} ± {statistics.stdev(finals):.3f} |" in row
    for s in (0, 1):
        (records / f"wiki5k-preset-gru-s{s}" / "final.json").unlink()
    (row,) = [line for line in results_table(records).splitlines() if "GRU | paper's preset | 2.73" in line]
    assert row.endswith("| — | not finished | — | — | — | stopped: 0, 1, 2 | — |")


def test_cpu_time_is_a_lower_bound_where_a_command_was_killed_unrecorded(tmp_path):
    """A command killed with its session leaves no commands.tsv row, but its log line: the
    row's time is then marked as a lower bound, and the note says why."""
    records = records_with(tmp_path, [f"wiki5k-preset-gru-s{s}" for s in range(3)], "".join(
        f"wiki5k/preset-gru-s{s}\tcellgraph train\t{cpu}\t1\t0\n" for s, cpu in enumerate((9, 10, 14))))

    def row() -> str:
        (line,) = [line for line in results_table(records).splitlines() if "GRU | paper's preset | 2.73" in line]
        return line

    log = records / "wiki5k-preset-gru-s1" / "wiki5k-preset-gru-s1.log"
    log.write_text("$ cellgraph train --preset paper-wiki5k-gru\nepoch 1 ...\n", encoding="utf-8")
    assert row().endswith("| 11 |")  # one command started, one recorded
    log.write_text(log.read_text() + "$ cellgraph train --resume runs/x\nepoch 2 ...\n", encoding="utf-8")
    assert row().endswith("| ≥ 11 |")
    assert results_table(records).endswith("\n\n" + LOWER_BOUND)


def test_a_run_that_counts_its_own_cpu_time_is_read_from_final_json(tmp_path):
    """final.json's cpu_seconds (every process of the run) wins over commands.tsv, whose rows
    miss a killed command; runs without it keep the commands.tsv rule."""
    records = records_with(tmp_path, [f"wiki5k-preset-gru-s{s}" for s in range(3)], "".join(
        f"wiki5k/preset-gru-s{s}\tcellgraph train\t{cpu}\t1\t0\n" for s, cpu in enumerate((9, 10, 14))))
    log = records / "wiki5k-preset-gru-s1" / "wiki5k-preset-gru-s1.log"
    log.write_text("$ cellgraph train --preset p\n$ cellgraph train --resume r\n", encoding="utf-8")
    final = records / "wiki5k-preset-gru-s1" / "final.json"
    final.write_text(json.dumps({**read_json(final), "cpu_seconds": 31.0}), encoding="utf-8")
    (row,) = [line for line in results_table(records).splitlines() if "GRU | paper's preset | 2.73" in line]
    assert row.endswith("| 18 |")  # (9 + 31 + 14) / 3, complete
    assert LOWER_BOUND not in results_table(records)


def test_the_reading_sets_each_model_s_better_row_on_validation_against_the_gru(tmp_path):
    """Per model, the row with the better validation mean (here: the GRU's preset, RRNN-GRU's
    best); the test gap between them and that gap over the larger test std; a row with a
    seed missing holds the line back, naming the row."""
    names = [f"wiki-{kind}-{model}-s{s}" for kind in ("preset", "best") for model in ("gru", "rrnn-gru")
             for s in range(3)]
    records = records_with(tmp_path, names, "")

    def test_bpc(name: str) -> list[float]:
        return [read_json(records / f"wiki-{name}-s{s}" / "final.json")["test_bpc"] for s in range(3)]

    (line,) = [line for line in reading_table(records).splitlines() if line.startswith("| Wiki-10k")]
    gru, rrnn = test_bpc("preset-gru"), test_bpc("best-rrnn-gru")
    gap = statistics.fmean(rrnn) - statistics.fmean(gru)
    spreads = gap / max(statistics.stdev(gru), statistics.stdev(rrnn))
    assert line == (f"| Wiki-10k, BPC ↓ | {statistics.fmean(gru):.3f} ± {statistics.stdev(gru):.3f} (preset) | "
                    f"RRNN-GRU {statistics.fmean(rrnn):.3f} ± {statistics.stdev(rrnn):.3f} (best) | {gap:.3f} | "
                    f"{spreads:.1f} | 2.42 / 2.57 | GRU wins |")
    shutil.rmtree(records / "wiki-best-rrnn-gru-s2")
    (line,) = [line for line in reading_table(records).splitlines() if line.startswith("| Wiki-10k")]
    assert line.endswith("| RRNN-GRU: best row, 2 of 3 seeds finished |")


def test_a_wiki_title_names_the_cleaning_of_its_records(tmp_path):
    """Records made before ``wiki_cleaning`` existed (no key in config.json) read as ``paper``."""
    names = [f"wiki5k-preset-gru-s{s}" for s in range(2)]
    records = records_with(tmp_path, names, "")
    assert all("wiki_cleaning" not in read_json(records / n / "config.json") for n in names)
    title = [line for line in results_table(records).splitlines() if line.startswith("| Wiki-")]
    assert title[0].startswith("| Wiki-5k, BPC ↓ (paper text) |") and title[1].startswith("| Wiki-10k, BPC ↓ |")
    config = records / names[1] / "config.json"
    config.write_text(json.dumps({**read_json(config), "wiki_cleaning": "wikifil"}), encoding="utf-8")
    assert "| Wiki-5k, BPC ↓ (paper + wikifil text) |" in results_table(records)
