#!/usr/bin/env bash
# The GPU check: every measurement and test that BENCHMARKS.md's "On a GPU" section asks of a
# machine with a CUDA GPU, in one command, each part under its own time limit.
#
#   bash benchmarks/gpu_check.sh OUT [PART ...]
#
# OUT: a folder for what the parts print and write (made if missing); the run folders go to a
# temporary folder. PARTS (default: all, in this order):
#   env       the machine: nvidia-smi, torch, the GPU
#   tests     the tests with a CUDA case (each compares the GPU with the CPU, or counts syncs)
#   bench     cellgraph bench --device DEVICE --json OUT/bench.json
#   epochs    one real epoch each of the presets paper-wiki10k-rrnn-gru and paper-wiki5k-rrnn, and of the
#             discovery recipe's recipe-rrnn-gru (Wiki-10k) and recipe-rrnn (Wiki-5k)
#   torchrun  cellgraph train under torchrun, one process on the device (NCCL on a GPU)
#   compile   bench's item 6 in torch.compile's mode reduce-overhead (CUDA graphs on a GPU), to OUT/compile.json
#   discover  the cell search's evaluator (discover_bench's part 1) on DEVICE: evaluations per GPU-hour with
#             the default 4 restarts in one batched program (OUT/discover.json) and with 32, batched only (OUT/discover-r32.json)
# Each part's output goes to OUT/PART.log; OUT/summary.json gives each part's exit code and
# seconds, and each epoch's time_s from its run's metrics.jsonl. The command fails if a part did.
#
# Environment: DEVICE (default cuda), CELLGRAPH_DATA (the data folder; by default where cellgraph finds
# Wiki's data, ~/.cache/cellgraph after `cellgraph data fetch wiki`; the epochs part needs it),
# QUICK=1 (toy sizes, for a check of this script on the CPU: DEVICE=cpu QUICK=1), PYTHON (the
# interpreter with torch and cellgraph; default python3), BUDGET (seconds for the whole check:
# each part's limit is cut to what is left, and a part with nothing left is recorded as stopped,
# so that the check ends on its own inside a machine's lease; default: none), and each
# part's limit in seconds: LIMIT_TESTS (300), LIMIT_BENCH (540), LIMIT_TORCHRUN (120), LIMIT_COMPILE (300),
# LIMIT_DISCOVER (240) and
# LIMIT_EPOCH (for both epochs; by default 60 s for RRNN-GRU and 120 s for RRNN, six and two
# times their targets of 10 s and 60 s, start and validation included). An epoch stopped at its
# limit is recorded as such (exit code 124): it missed its target. BENCH_ITEMS: bench's --items (default: all).
set -uo pipefail

ALL_PARTS="env tests bench epochs torchrun compile discover"
if [ $# -lt 1 ]; then
    echo "usage: bash benchmarks/gpu_check.sh OUT [$ALL_PARTS]" >&2
    exit 2
fi
OUT=$1
shift
PARTS=${*:-$ALL_PARTS}
for part in $PARTS; do
    [[ " $ALL_PARTS " == *" $part "* ]] || { echo "gpu_check: unknown part '$part' (one of $ALL_PARTS)" >&2; exit 2; }
done
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-0}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-0}
STARTED=$(date +%s)
command -v "$PY" >/dev/null || { echo "gpu_check: no interpreter '$PY' (set PYTHON to the one with torch)" >&2; exit 2; }
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "gpu_check: BUDGET must be whole seconds, got '$BUDGET'" >&2; exit 2; }
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)  # before the cd below: OUT is relative to where the check was started
cd "$(dirname "$0")/.."
RUNS=$(mktemp -d)
trap 'rm -rf "$RUNS"' EXIT
export CELLGRAPH_NO_PROGRESS=1 PYTHONUNBUFFERED=1
SUMMARY=()
FAILED=0

# record PART NAME RC SECONDS [EXTRA_JSON]: one entry of summary.json, which is rewritten at
# once, whole (a check stopped from outside keeps the parts it finished)
record() {
    SUMMARY+=("{\"part\": \"$1\", \"name\": \"$2\", \"exit_code\": $3, \"seconds\": $4${5:+, $5}}")
    (IFS=,; echo "[${SUMMARY[*]}]") | "$PY" -m json.tool >"$OUT/.summary.json" \
        && mv "$OUT/.summary.json" "$OUT/summary.json"
    [ "$3" -eq 0 ] || FAILED=1
    echo "gpu_check: $1 $2: exit code $3, $4 s"
}

# capped LIMIT: LIMIT, or the seconds BUDGET leaves where they are fewer (0 once it is spent)
capped() {
    local left
    [ "$BUDGET" -gt 0 ] || { echo "$1"; return; }
    left=$((BUDGET - ($(date +%s) - STARTED)))
    [ "$left" -lt "$1" ] && echo $((left > 0 ? left : 0)) || echo "$1"
}

# timed PART NAME LIMIT COMMAND...: run COMMAND under LIMIT seconds (capped by BUDGET), its
# output to OUT/PART.log; with no time left it does not start and counts as stopped (124)
timed() {
    local part=$1 name=$2 limit start rc
    limit=$(capped "$3")
    shift 3
    if [ "$limit" -le 0 ]; then
        echo "### $name: not started, BUDGET=$BUDGET s spent" >>"$OUT/$part.log"
        LAST_RC=124 LAST_SECONDS=0
        return
    fi
    start=$(date +%s.%N)
    echo "### $name: $*" >>"$OUT/$part.log"
    timeout --kill-after 10 "$limit" "$@" >>"$OUT/$part.log" 2>&1
    rc=$?
    LAST_SECONDS=$("$PY" -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" \
                   "$start" "$(date +%s.%N)")
    LAST_RC=$rc
}

# epoch_time RUN: time_s of the run's first epoch, or null
epoch_time() {
    "$PY" -c "
import json, pathlib, sys
path = pathlib.Path(sys.argv[1])
lines = path.read_text().splitlines() if path.exists() else []
print(json.loads(lines[0])['time_s'] if lines else 'null')" "$1/metrics.jsonl"
}

quick_sets=()
[ "$QUICK" = 1 ] && quick_sets=(--set max_train=32 --set max_eval=8 --set hidden_size=8 --set scoring_hidden=8
                                --set n_iterations=2 --set batch_size=16)

for part in $PARTS; do
    : >"$OUT/$part.log"
    case $part in
    env)
        timed env env 60 bash -c "nvidia-smi || echo 'nvidia-smi: not found'; $PY -m cellgraph --version; \
$PY -c 'import sys, torch; print(sys.version); print(\"torch\", torch.__version__, \"CUDA\", torch.version.cuda, \
\"GPU\", torch.cuda.get_device_name() if torch.cuda.is_available() else None)'"
        record env env "$LAST_RC" "$LAST_SECONDS" ;;
    tests)
        # the one test named for machines without a GPU is left out (it also needs optuna)
        select="(cuda or gpu or nccl or alike) and not no_gpu_is_available"
        [ "$QUICK" = 1 ] && select="alike and gru and not rrnn"
        timed tests pytest "${LIMIT_TESTS:-300}" "$PY" -m pytest -q -p no:cacheprovider -k "$select" \
            tests/backends/torch/test_device.py tests/backends/torch/test_torch_search.py \
            tests/backends/torch/test_torch_rrnn_gru.py tests/backends/torch/test_distributed.py
        record tests pytest "$LAST_RC" "$LAST_SECONDS" ;;
    bench)
        flags=(--device "$DEVICE" --json "$OUT/bench.json")
        [ "$QUICK" = 1 ] && flags+=(--quick --threads 1)
        [ -n "${BENCH_ITEMS:-}" ] && flags+=(--items "$BENCH_ITEMS")
        timed bench bench "${LIMIT_BENCH:-540}" "$PY" -m cellgraph bench "${flags[@]}"
        record bench bench "$LAST_RC" "$LAST_SECONDS" ;;
    epochs)
        # PRESET[@TASK]:LIMIT; the recipes' epochs start cold (warm_start=none: the same step, no teacher to train)
        for spec in paper-wiki10k-rrnn-gru:60 paper-wiki5k-rrnn:120 recipe-rrnn-gru@wiki:60 recipe-rrnn@wiki5k:120; do
            limit=${LIMIT_EPOCH:-${spec#*:}}
            name=${spec%:*}
            preset=${name%@*}
            task=()
            # cold, the recipe's full RRNN diverges at full size (on the CPU too): its skipped steps are still timed
            [ "$name" != "$preset" ] && task=(--task "${name#*@}" --set warm_start=none --set max_bad_steps=1000000)
            timed epochs "$preset" "$limit" "$PY" -m cellgraph train --preset "$preset" "${task[@]}" \
                --set epochs=1 --set max_eval=16 --set log_structures=0 "${quick_sets[@]}" \
                --device "$DEVICE" --out "$RUNS/$preset"
            record epochs "$preset" "$LAST_RC" "$LAST_SECONDS" "\"time_s\": $(epoch_time "$RUNS/$preset")"
        done ;;
    torchrun)
        timed torchrun torchrun "${LIMIT_TORCHRUN:-120}" "$PY" -m torch.distributed.run --standalone \
            --nproc_per_node 1 -m cellgraph train --task planted --model rrnn-gru --set epochs=1 --set warm_start=none \
            --set max_train=64 --set max_eval=16 --set hidden_size=16 --set scoring_hidden=8 \
            --device "$DEVICE" --out "$RUNS/torchrun"
        record torchrun torchrun "$LAST_RC" "$LAST_SECONDS" ;;
    compile)
        flags=(--mode reduce-overhead --device "$DEVICE" --json "$OUT/compile.json")
        [ "$QUICK" = 1 ] && flags+=(--quick)
        timed compile compile "${LIMIT_COMPILE:-300}" "$PY" -m cellgraph.benchmarks.compile_bench "${flags[@]}"
        record compile compile "$LAST_RC" "$LAST_SECONDS" ;;
    discover)
        sizes=(--epochs 20 --repeat 2)
        [ "$QUICK" = 1 ] && sizes=(--epochs 1 --repeat 1)
        for restarts in 4 32; do
            name=discover extra=()
            [ "$restarts" = 4 ] || { name=discover-r$restarts; extra=(--batched-only); }
            timed discover "$name" "${LIMIT_DISCOVER:-240}" "$PY" -m cellgraph.benchmarks.discover_bench "${sizes[@]}" \
                --restarts "$restarts" "${extra[@]}" --budget 0 --device "$DEVICE" --json "$OUT/$name.json"
            record discover "$name" "$LAST_RC" "$LAST_SECONDS"
        done ;;
    esac
done

echo "gpu_check: summary in $OUT/summary.json"
exit $FAILED
