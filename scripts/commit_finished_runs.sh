#!/usr/bin/env bash
# Stage the compact results of every finished run under a sweep folder (default: docs/results/paper-budget):
# summary.json, config.json, diagnostics.csv and the harvested *.csv.gz of run folders that hold a summary.json.
# Unfinished runs are never staged (their files change while they run). Run
# `python benchmarks/paper_budget.py harvest` first.
set -euo pipefail
folder="${1:-docs/results/paper-budget}"
git add "$folder/.gitignore"
for s in $(find "$folder" -path '*/runs/*/summary.json'); do
  d="$(dirname "$s")"
  git add "$d/summary.json" "$d/config.json" "$d/diagnostics.csv"
  for f in "$d"/*.csv.gz; do [ -e "$f" ] && git add "$f"; done
done
for m in $(find "$folder" -name sweep.json); do git add "$m"; done
