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

# The web UI (web/dist, served by the dispatcher at /ui). npm ci only when the lock file is
# newer than the installed modules. Without npm the platform still builds, without the UI.
if [ -f web/package.json ]; then
  if command -v npm >/dev/null 2>&1; then
    (cd web && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund; } && npm run build)
  else
    echo "build.sh: npm not found: skipping the web UI (/ui answers UI_NOT_BUILT)" >&2
  fi
fi
