#!/usr/bin/env bash
# test.sh — `make test` and CI: go vet and go test over every module of go.work, then the web/
# tests when web/package.json exists, against the test profile's Postgres and Redis
# (scripts/stack.sh, ports 25433/26380, data in .run/test/, fsync off).
#
# The test stack is stopped at the end, pass or fail — unless it was already running before this
# script started (someone is using it), or SWITCHYARD_KEEP_STACK=1.
# GO_TEST_FLAGS adds flags to go test (e.g. GO_TEST_FLAGS='-race -run TestDispatch').
# Exit status: non-zero when any step failed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$SECONDS

say() { echo "test: $*" >&2; }

eval "$("$root/scripts/stack.sh" env test)"
pg_port=${SWITCHYARD_DATABASE_URL#*@*:}; pg_port=${pg_port%%/*}
redis_port=${SWITCHYARD_REDIS_URL##*:}; redis_port=${redis_port%%/*}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

stop_stack=1
if [ "${SWITCHYARD_KEEP_STACK:-0}" = 1 ]; then
  stop_stack=0
elif port_open "$pg_port" && port_open "$redis_port"; then
  say "the test stack is already running: leaving it running afterwards"
  stop_stack=0
fi

finish() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$stop_stack" = 1 ]; then "$root/scripts/stack.sh" stop test || true; fi
  echo "test: total $((SECONDS - t0)) s"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$root/scripts/stack.sh" start test
eval "$("$root/scripts/stack.sh" env test)"

mapfile -t pkgs < <("$root/scripts/modules.sh")
failed=()

say "go vet ${pkgs[*]}"
go vet "${pkgs[@]}" || failed+=("go vet")

say "go test ${pkgs[*]}"
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test -count=1 -timeout 20m -p 2 ${GO_TEST_FLAGS:-} "${pkgs[@]}" || failed+=("go test")

if [ -f web/package.json ]; then
  say "web tests (web/)"
  if ! command -v npm >/dev/null 2>&1; then
    say "npm is not installed: cannot run the web tests"
    failed+=("web tests")
  else
    [ -z "${CHROME_BIN:-}" ] && [ -x /usr/bin/chromium ] && export CHROME_BIN=/usr/bin/chromium
    if [ -f web/package-lock.json ]; then install=(npm ci --no-audit --no-fund); else install=(npm install --no-audit --no-fund); fi
    if (cd web && "${install[@]}" && npm test); then :; else failed+=("web tests"); fi
  fi
else
  say "web tests skipped: web/package.json does not exist"
fi

if [ ${#failed[@]} -gt 0 ]; then
  say "FAILED: ${failed[*]}"
  exit 1
fi
say "all passed"
