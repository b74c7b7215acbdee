"""Item 7 of ``cellgraph bench``: the soft step data-parallel over one-thread processes
computes the one-process gradient, and its processes never outlive the call (no speed
assertions)."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from cellgraph.benchmarks.parallel_bench import compare_parallel
from cellgraph.cli import main
from cellgraph.errors import CellGraphError

TINY = dict(p=6, batch=4, steps=3, n_iterations=3, scoring_hidden=8, repeat=1)


def test_two_processes_give_the_one_process_gradient():
    result = compare_parallel(2, **TINY)
    assert result["config"]["processes"] == 2 and result["config"]["process_group"] == "gloo"
    assert result["one_process_s"] > 0 and result["parallel_s"] > 0
    assert result["speedup"] == pytest.approx(result["one_process_s"] / result["parallel_s"])
    assert result["max_abs_gradient"] > 1e-3  # a gradient worth comparing
    assert result["max_abs_gradient_difference"] <= 1e-4 * result["max_abs_gradient"]


@pytest.mark.parametrize("processes, batch, message", [(1, 4, "at least 2 processes"),
                                                       (3, 4, "batch 4 does not split evenly over 3")])
def test_bad_splits_are_refused_before_any_work(processes, batch, message):
    with pytest.raises(CellGraphError, match=message):
        compare_parallel(processes, **{**TINY, "batch": batch})


def test_processes_past_the_time_limit_are_stopped_with_an_error():
    with pytest.raises(CellGraphError, match="did not finish in 0.01 s"):
        compare_parallel(2, **TINY, timeout_s=0.01)
    assert not multiprocessing.active_children()


def test_bench_with_two_threads_prints_item_7(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--threads", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    parallel = json.loads(out.read_text())["parallel"]
    assert parallel["config"]["processes"] == 2 and parallel["config"]["batch"] == 4
    assert "(7) RRNN soft step (sizes of (2)) data-parallel: 2 one-thread processes" in printed
    assert f"| {parallel['one_process_s']:.4f} | {parallel['parallel_s']:.4f} | {parallel['speedup']:.2f}x |" in printed
