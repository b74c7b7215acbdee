"""``cellgraph bench --quick`` at toy sizes (JSON structure, trees agree; no speed
assertions) and the recompute option of the sequence modules (identical gradients)."""

from __future__ import annotations

import json

import pytest
import torch

from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU
from cellgraph.benchmarks import suite
from cellgraph.cli import main
from cellgraph.errors import CellGraphError


@pytest.mark.parametrize("mode", ["soft", "straight-through", "hard"])
def test_recompute_gives_identical_values_and_gradients(mode):
    grads = {}
    for recompute in (False, True):
        torch.manual_seed(0)
        model = RRNN(6, 2, 4, scoring_hidden=5, mode=mode, recompute=recompute).double()
        x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
        output, _, traces = model(x)
        (output.square().sum() + traces[-1][0].best_score.sum()).backward()
        grads[recompute] = [output.detach(), x.grad] + [p.grad for p in model.parameters()]
    for plain, checked in zip(grads[False], grads[True]):
        assert plain is not None and torch.equal(plain, checked)


def test_recompute_rrnn_gru_gradients():
    grads = {}
    for recompute in (False, True):
        torch.manual_seed(1)
        model = RRNNGRU(5, 2, scoring_hidden=4, recompute=recompute)
        model(torch.randn(4, 3, 5))[0].sum().backward()
        grads[recompute] = [p.grad for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(grads[False], grads[True]))


def _has_wiki5k() -> bool:
    from cellgraph.data.datadir import resolve_data_dir

    try:
        resolve_data_dir(dataset="wiki5k")
    except CellGraphError:
        return False
    return True


def test_bench_quick_writes_the_json_and_the_trees_agree(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--threads", "1", "--json", str(out)]) == 0
    printed, progress = capsys.readouterr()
    result = json.loads(out.read_text())
    assert "partial" not in result
    assert [line.split()[1] for line in progress.splitlines() if line.startswith("bench: ")] == [
        "search", "steps", "flops", "scaling", "epoch", "compile", "parallel", "cells"]
    assert result["quick"] is True and result["machine"]["cores"] >= 1
    assert result["machine"]["torch_threads"] == 1
    assert f"malloc: {result['machine']['allocator']}" in printed
    search = result["search"]
    assert search["all_trees_equal"] and search["trees_equal"] == search["trees_compared"] == 3
    models = result["steps"]["models"]
    assert set(models) == {"rrnn_soft", "rrnn_straight_through", "rrnn_soft_recompute", "rrnn_soft_sample_norm",
                           "rrnn_soft_reading", "rrnn_soft_sync_free", "rrnn_recipe", "rrnn_recipe_scored",
                           "rrnn_gru", "frozen_gru", "gru_cell_loop", "torch_gru"}
    assert models["rrnn_soft"]["ops"] == models["rrnn_soft_reading"]["ops"]  # the CPU's default search
    assert models["rrnn_recipe"]["ops"]["compute"] < models["rrnn_recipe_scored"]["ops"]["compute"]  # no alpha
    assert models["torch_gru"]["time_vs_torch_gru"] == 1.0
    assert all(row["time_s"] > 0 and row["peak_bytes"] > 0 for row in models.values())
    assert all(row["time_per_compute_op_us"] == pytest.approx(row["time_s"] / row["ops"]["compute"] * 1e6)
               for row in models.values())
    assert models["rrnn_soft"]["ops"]["compute"] > models["rrnn_gru"]["ops"]["compute"] > models["torch_gru"]["ops"]["compute"]
    assert "| compute ops | views | time per compute op (us) |" in printed
    assert result["flops"]["training_step_flops"]["nominal"] > result["flops"]["training_step_flops"]["executed"] > 0
    assert [row["n_iterations"] for row in result["scaling"]["n_iterations"]] == [2, 4]
    assert [row["scoring_hidden"] for row in result["scaling"]["scoring_hidden"]] == [2, 6]
    assert all(row["time_s"] > 0 for row in result["scaling"]["scoring_hidden"])
    assert "| scoring_hidden | time (s) |" in printed
    if _has_wiki5k():
        assert result["epoch"]["estimated"] and result["epoch"]["batches_measured"] == 1
        assert "ESTIMATED from 1 of 313 batches" in printed
    else:  # a checkout without the data: the other items still ran
        assert "no Wiki-5k data" in result["epoch"]["skipped"]
        assert "(5) one epoch of wiki5k, full RRNN: skipped: no Wiki-5k data" in printed
    assert len(result["targets"]) == 10
    assert all(isinstance(t["met"], bool) for t in result["targets"] if t["value"] is not None)
    assert "trees equal" in printed
    assert result["compile"] is None and "(6) torch.compile of the search: skipped" in printed
    assert result["parallel"] == {"skipped": "one thread: no second core for a second process"}
    assert "(7) the soft step data-parallel over one-thread processes: skipped: one thread" in printed
    assert result["machine"]["device"] == "cpu" and result["machine"]["gpu"] is None
    assert "device: cpu" in printed and "GPU (" not in printed


def test_a_bench_stopped_midway_keeps_the_items_it_measured(tmp_path, monkeypatch):
    """The JSON is rewritten after each item, marked partial: a run stopped from outside (a
    time limit on a lent GPU, say) keeps what it measured."""
    def stop(result):
        raise RuntimeError("stopped from outside")
    monkeypatch.setattr(suite, "_items", lambda quick, threads, where: [("search", lambda result: {"speedup": 2.0}),
                                                                         ("steps", stop)])
    out = tmp_path / "bench.json"
    with pytest.raises(RuntimeError, match="stopped from outside"):
        main(["bench", "--quick", "--threads", "1", "--json", str(out)])
    result = json.loads(out.read_text())
    assert result["partial"] is True and result["search"] == {"speedup": 2.0} and "steps" not in result


def test_bench_json_into_a_missing_folder_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(suite, "_items", lambda *args: pytest.fail("the bench ran"))
    with pytest.raises(SystemExit) as stop:
        main(["bench", "--quick", "--json", str(tmp_path / "no" / "bench.json")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().endswith(f"folder {tmp_path / 'no'} does not exist")


def test_bench_without_data_skips_the_epoch_item_and_keeps_the_rest(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CELLGRAPH_DATA", str(tmp_path / "no-data"))
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--threads", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert "no-data" in result["epoch"]["skipped"] and "steps" in result and "scaling" in result
    epoch_target = next(t for t in result["targets"] if t["target"].startswith("Wiki-5k"))
    assert epoch_target["met"] is None and epoch_target["value"] is None
    assert "(5) one epoch of wiki5k, full RRNN: skipped: no Wiki-5k data" in printed
    assert "| Wiki-5k RRNN epoch (s) | not measured |" in printed


def test_a_gpu_run_is_held_to_the_gpu_targets(tmp_path):
    """On a GPU the soft step is held against the 2-core CPU's (20x), its rate at batch 256
    against the GPU's matmul (25%), and the Wiki-5k epoch against 60 s; the other targets stay.
    The batch-256 rate is item 3's formula: a batch-256 row of item 4 that costs what item 2's
    step costs per cell gives item 3's fraction."""
    from cellgraph.benchmarks import suite

    assert main(["bench", "--quick", "--threads", "1", "--json", str(tmp_path / "b.json")]) == 0
    result = json.loads((tmp_path / "b.json").read_text())
    cpu = {t["target"]: t for t in suite.targets(result)}
    result["machine"]["gpu"] = {"name": "a GPU"}
    gpu = {t["target"]: t for t in suite.targets(result)}
    soft = result["steps"]["models"]["rrnn_soft"]["time_s"]
    speedup = gpu[f"RRNN soft training step, speed-up over the 2-core CPU's {suite.CPU_REFERENCE_STEP_S} s (x)"]
    assert speedup["value"] == pytest.approx(suite.CPU_REFERENCE_STEP_S / soft) and speedup["limit"] == 20
    rate = gpu["RRNN step at batch 256 GFLOP/s / torch.matmul GFLOP/s (executed FLOPs)"]
    assert rate["value"] is None and rate["met"] is None  # the quick sweep stops at batch 2
    assert gpu["Wiki-5k RRNN epoch (s)"]["limit"] == 60 and cpu["Wiki-5k RRNN epoch (s)"]["limit"] == 600
    assert "RRNN soft training step (s)" in cpu and "RRNN soft training step (s)" not in gpu
    assert len(gpu) == len(cpu) == 10
    config = result["steps"]["config"]
    result["scaling"]["base"] = {key: config[key] for key in ("p", "n_iterations", "scoring_hidden", "steps")}
    result["scaling"]["batch"].append({"batch": 256, "time_s": soft * 256 / config["batch"]})
    rate = next(t for t in suite.targets(result) if t["target"].startswith("RRNN step at batch 256"))
    assert rate["value"] == pytest.approx(result["flops"]["fraction_of_matmul"]["executed"])


def test_search_flops_count_the_incremental_pairs():
    from cellgraph.benchmarks.flops_bench import search_flops
    from cellgraph.benchmarks.search_bench import paper_space

    p, H = 3, 5
    flops = search_flops(paper_space(2), p, H)
    # 4 nodes projected once (2p FLOPs per output, 2 * 4 tuples * p outputs), 6 pairs in all
    projection = 4 * 2 * p * 8 * p
    per_candidate = 2 * p * H + 2 * H
    build = 6 * 4 * 2 * (2 * p + 4 * p)
    assert flops["nominal"] == projection + build + 6 * 32 * per_candidate


def test_dispatched_ops_counts_forward_and_backward_by_kind():
    from cellgraph.benchmarks.measure import dispatched_ops

    a = torch.randn(3, 4, requires_grad=True)
    assert dispatched_ops(lambda: a.detach().view(-1)) == {
        "compute": 0, "views": 2, "allocations": 0}
    assert dispatched_ops(lambda: torch.empty(3)) == {"compute": 0, "views": 0, "allocations": 1}
    forward = dispatched_ops(lambda: torch.sigmoid(a * 2).sum())["compute"]
    assert forward == 3  # mul, sigmoid, sum
    # the backward pass adds at least the seed gradient, sigmoid's and mul's backward
    assert dispatched_ops(lambda: torch.sigmoid(a * 2).sum().backward())["compute"] >= forward + 3


@pytest.mark.parametrize("enabled", [True, False])
def test_best_time_keeps_the_garbage_collector_out_of_the_timed_calls(enabled):
    import gc

    from cellgraph.benchmarks.measure import best_time

    seen = []
    before = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        best_time(lambda: seen.append(gc.isenabled()), repeat=3, warmup=1)
        assert seen == [enabled, False, False, False]  # the warm-up as the caller had it, then off
        assert gc.isenabled() is enabled  # restored
    finally:
        (gc.enable if before else gc.disable)()


@pytest.mark.parametrize("maps, expected", [
    ("7f00-7f10 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n", "glibc"),
    ("7f00-7f10 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10\n", "tcmalloc"),
    ("7f00-7f10 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n", "jemalloc"),
])
def test_the_machine_names_the_malloc_the_process_runs_on(maps, expected):
    from cellgraph.benchmarks.measure import allocator, machine

    assert allocator(maps) == expected
    assert machine()["allocator"] == allocator()
