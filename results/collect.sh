#!/usr/bin/env bash
# Copy the records of finished run folders into results/runs/PREFIX-NAME/: config, env, metrics,
# final and eval JSON and the structure logs; never checkpoints.
# usage: results/collect.sh PREFIX RUN_DIR [RUN_DIR ...]
set -euo pipefail
prefix=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
for run in "$@"; do
  [ -f "$run/final.json" ] || { echo "skipping $run: no final.json (unfinished)" >&2; continue; }
  dest="$here/runs/$prefix-$(basename "$run")"
  mkdir -p "$dest"
  for f in config.json env.json metrics.jsonl final.json eval_*.json; do
    [ -e "$run/$f" ] && cp "$run/$f" "$dest/"
  done
  [ -d "$run/structures" ] && { rm -rf "$dest/structures"; cp -r "$run/structures" "$dest/"; }
  echo "$dest"
done
