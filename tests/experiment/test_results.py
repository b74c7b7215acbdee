"""RESULTS.md's tables of the corrected model are what ``cellgraph summarize`` prints from the
records committed under ``results/runs/``: a fresh clone reprints them. The superseded tables
are in its appendix, docs/results-history.md; a row may be in either file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cellgraph.cli import main
from needs_data import needs_data

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "results" / "runs"
TABLE1 = ROOT / "results" / "table1"
#: the Table 1 rows made before the L2 and TD fixes (RESULTS.md keeps them, superseded)
TABLE1_SUPERSEDED = ROOT / "results" / "table1-superseded"
#: Wiki-10k with the argmax choosing RRNN-GRU's checkpoint (RESULTS.md keeps it, superseded)
TABLE1_ARGMAX = ROOT / "results" / "table1-argmax"
#: the Wiki experiments of the Table 1 rerun on the authors' text (`wikifil`)
TABLE1_WIKIFIL = ROOT / "results" / "table1-wikifil"
#: the discovery recipe's ablations (RESULTS.md, "The discovery recipe: cells worth exporting")
RECIPE_ROOTS = ["recipe-planted", "recipe-planted-variants", "recipe-wiki5k-slice", "recipe-planted-full",
                "recipe-wiki10k", "recipe-wiki5k-2ep"]
#: the ablations on slices, whose tables moved to docs/results-history.md
HISTORY_RECIPE_ROOTS = RECIPE_ROOTS[:3]
#: the M question (RESULTS.md, "The M question"): the recipe's cell, torch's and the GRUs trained
#: from scratch, beside the recipe's runs
M_QUESTION = ["m-question/*-s?", "recipe-wiki10k/rrnn-gru-recipe-s?"]


def _results() -> str:
    """RESULTS.md and its appendix of superseded sections."""
    return "\n".join((ROOT / name).read_text(encoding="utf-8") for name in ("RESULTS.md", "docs/results-history.md"))

#: (args of cellgraph summarize, run-folder globs): each table of RESULTS.md's section on the corrected model
TABLES = [
    (["--by", "name", "--terms"], ["slice-gru-s?", "slice-flex-s?", "slice-gates-s?", "slice-noaux-s?"]),
    (["--by", "name"], ["slice-noauxanneal-s?", "slice-noauxanneal01-s?", "slice-flexid-s?"]),
    (["--by", "name", "--terms"], ["slice-tdonly-s?", "slice-marginonly-s?"]),
    (["--by", "name", "--terms"], ["slice-tdinternal-s?", "slice-tdroot-s?"]),
    (["--by", "name", "--terms"], ["slice-flexroot-s?"]),
    (["--by", "name", "--recovery"], ["planted-td-internal-s?", "planted-td-root-s?"]),
    (["--by", "name"], ["planted-rrnn-s?"]),
    (["--by", "name"], ["w5k01-rrnn-s?"]),
    (["--by", "name"], ["planted-m01-rrnn-s?"]),
    (["--by", "name"], ["planted-m1-rrnn-s?", "planted-std-rrnn-s?"]),
    (["--by", "name"], ["w5k01-rrnn-s?", "w5k02-rrnn-s?"]),
    (["--by", "name"], ["w5k02-rrnn-s?", "w5k03-rrnn-s?"]),
    (["--by", "name"], ["wiki-alt0-rrnn-gru-s?"]),
    (["--by", "name"], ["sst-slice-gru-s?", "sst-slice-noaux-s?"]),
    (["--by", "name", "--terms"], ["wiki-alt0-rrnn-gru-s?", "wiki-noaux-rrnn-gru-s?", "wiki-noauxalt-rrnn-gru-s?"]),
]


#: (records folder, experiment, args): each finished experiment of the Table 1 rerun (cellgraph reproduce)
TABLE1_ROWS = [(TABLE1, "wiki5k", ["--by", "name"]), (TABLE1, "wiki", ["--by", "name"]), (TABLE1, "sst", ["--by", "name"]), (TABLE1, "ptb", ["--by", "name"]),
               (TABLE1, "planted", ["--by", "name", "--recovery"]),
               (TABLE1_WIKIFIL, "wiki5k", ["--by", "name"]), (TABLE1_WIKIFIL, "wiki", ["--by", "name"]),
               (TABLE1_SUPERSEDED, "planted", ["--by", "name", "--recovery"]),
               (TABLE1_SUPERSEDED, "wiki", ["--by", "name"]), (TABLE1_ARGMAX, "wiki", ["--by", "name"])]


def _check_reprinted(args, folders, rows, capsys):
    assert main(["summarize", *args, *folders]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    results = _results()
    assert len(table) == 2 + rows
    for line in table:
        assert line in results, f"RESULTS.md lacks the row {line!r}"


@pytest.mark.parametrize("records", [TABLE1, TABLE1_SUPERSEDED], ids=lambda p: p.name)
def test_results_md_holds_table1_as_reproduce_prints_it_from_the_records(records, capsys):
    assert main(["reproduce", "--table", "--records", str(records)]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    results = _results()
    assert len(table) > 20
    for line in table:
        assert line in results, f"RESULTS.md lacks the row {line!r}"


@needs_data
def test_results_md_holds_the_count_baselines_as_the_command_prints_them(capsys):
    assert main(["baseline", "--wiki-cleaning", "paper"]) == 0  # the text of the Table 1 records
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    results = _results()
    assert len(table) == 2 + 8
    for line in table:
        assert line in results, f"RESULTS.md lacks the row {line!r}"


@pytest.mark.parametrize("records, name, args", TABLE1_ROWS, ids=lambda v: getattr(v, "name", v))
def test_table1_rerun_is_reprinted_from_its_records(records, name, args, capsys):
    folders = sorted(p for p in records.glob(f"{name}-*") if (p / "config.json").is_file())
    rows = {re.sub(r"-s\d+$", "", p.name) for p in folders if (p / "final.json").is_file()}
    assert folders and all(any(p.name == f"{row}-s{seed}" for p in folders) for row in rows for seed in (0, 1, 2)), \
        "a run record of the Table 1 rerun is missing"  # finished or stopped, every seed is kept
    _check_reprinted(args, [str(p) for p in folders], len(rows), capsys)
    block = "\n".join((records / f"{name}.md").read_text(encoding="utf-8").splitlines()[2:])
    assert block and block in _results(), \
        f"RESULTS.md lacks the rows of {name}.md as one block"


@pytest.mark.parametrize("args, globs", TABLES)
def test_results_md_tables_are_reprinted_by_summarize(args, globs, capsys):
    folders = [str(p) for g in globs for p in sorted(RUNS.glob(g))]
    assert len(folders) == 3 * len(globs), "a run record is missing from results/runs"
    _check_reprinted(args, folders, len(globs), capsys)


@pytest.mark.parametrize("root", RECIPE_ROOTS)
def test_results_md_holds_the_recipe_tables_as_the_ablation_prints_them(root):
    """Each row of ``python -m cellgraph.benchmarks.recipe_ablation --root results/ROOT --summary``
    is a row of RESULTS.md itself (of docs/results-history.md for the slices' ablations), cell
    for cell (the command's columns, as a Markdown table)."""
    from cellgraph.benchmarks.recipe_ablation import _SHARES, _cell, summarize

    table = summarize(ROOT / "results" / root)
    results = _results() if root in HISTORY_RECIPE_ROOTS else (ROOT / "RESULTS.md").read_text(encoding="utf-8")
    assert len(table) >= 3
    for arm, row in table.items():
        cells = [arm, *(_cell(row[key]) for key in ("hard", "soft", *_SHARES)),
                 " ".join(map(str, row["stopped"])) or "-"]
        line = "| " + " | ".join(cells) + " |"
        assert line in results, f"RESULTS.md lacks the row {line!r} of {root}"


def test_results_md_holds_the_m_question_table_as_summarize_prints_it(capsys):
    folders = [str(p) for g in M_QUESTION for p in sorted((ROOT / "results").glob(g))]
    assert len(folders) == 3 * 5, "a run record of the M question is missing"
    _check_reprinted(["--by", "name"], folders, 5, capsys)
