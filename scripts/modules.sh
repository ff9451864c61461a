#!/usr/bin/env bash
# modules.sh — print one `./<module>/...` package pattern per module of go.work,
# so `go vet`/`go test` from the repo root cover every module (make vet, lint, test).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

dirs=$(go list -m -f '{{.Dir}}') || { echo "modules.sh: go list -m failed (is go.work valid?)" >&2; exit 1; }
while IFS= read -r dir; do
  [ -n "$dir" ] || continue
  rel=${dir#"$root"}
  rel=${rel#/}
  if [ -z "$rel" ]; then echo "./..."; else echo "./$rel/..."; fi
done <<<"$dirs"
