#!/usr/bin/env bash
# Copy the records of finished run folders into results/runs/PREFIX-NAME/: config, env, metrics,
# final and eval JSON and the structure logs; never checkpoints.
# usage: results/collect.sh [--unfinished] PREFIX RUN_DIR [RUN_DIR ...]
#   --unfinished: also runs without final.json (stopped or killed; their metrics are the record)
set -euo pipefail
unfinished=0
if [ "${1:-}" = "--unfinished" ]; then unfinished=1; shift; fi
prefix=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
for run in "$@"; do
  if [ ! -f "$run/final.json" ] && [ $unfinished = 0 ]; then
    echo "skipping $run: no final.json (unfinished; --unfinished takes it)" >&2; continue
  fi
  dest="$here/runs/$prefix-$(basename "$run")"
  mkdir -p "$dest"
  for f in "$run"/{config.json,env.json,metrics.jsonl,final.json} "$run"/eval_*.json; do
    [ -e "$f" ] && cp "$f" "$dest/"
  done
  [ -d "$run/structures" ] && { rm -rf "$dest/structures"; cp -r "$run/structures" "$dest/"; }
  echo "$dest"
done
