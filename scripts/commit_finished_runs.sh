#!/usr/bin/env bash
# Commit the compact results of every finished run under a sweep folder (default: docs/results/paper-budget):
# summary.json, config.json, diagnostics.csv and the harvested *.csv.gz of run folders that hold a summary.json,
# plus the report, its figures and the straggler's fixed-policy and frozen-policy results (not sweep.json: a
# partial sweep run from a narrowed config rewrites it with only its own runs; each run folder's config.json is the
# record). Unfinished runs are never committed (their files change while they run), and nothing else that happens
# to be staged is committed (`git commit -- PATHS`).
# Run `python benchmarks/paper_budget.py harvest` first.
#   scripts/commit_finished_runs.sh "commit message" [FOLDER]
set -euo pipefail
msg="${1:?usage: commit_finished_runs.sh MESSAGE [FOLDER]}"
folder="${2:-docs/results/paper-budget}"
paths=("$folder/.gitignore")
for s in $(find "$folder" -path '*/runs/*/summary.json' | sort); do
  d="$(dirname "$s")"
  paths+=("$d/summary.json" "$d/config.json" "$d/diagnostics.csv")
  for f in "$d"/*.csv.gz; do [ -e "$f" ] && paths+=("$f"); done
done
while IFS= read -r f; do paths+=("$f"); done < <(find "$folder" -maxdepth 3 \( -name 'report.md' -o -name '*.png' -o -name 'fixed.json' -o -name 'final.json' \) | sort)
git add -- "${paths[@]}"
git commit -q -m "$msg" -- "${paths[@]}" || echo "nothing new to commit"
