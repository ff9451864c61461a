#!/usr/bin/env bash
# build.sh — build every binary (each <module>/cmd/<name>) into .run/bin/<name>.
# Used by `make build` and scripts/run.sh. Extra arguments go to `go build` (e.g. -race).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

pkgs=()
for d in */cmd; do
  [ -d "$d" ] && pkgs+=("./$d/...")
done
[ ${#pkgs[@]} -gt 0 ] || { echo "build.sh: no <module>/cmd/ directories found" >&2; exit 1; }

mkdir -p .run/bin
# With several main packages and -o ending in '/', go build writes one binary per package there.
go build "$@" -o .run/bin/ "${pkgs[@]}"
