#!/usr/bin/env bash
# Chain hand-off benchmark (issue 19): Switchyard beside Temporal's dev server, interleaved.
# Usage: bench/cmd/handoff/run.sh [handoff flags]    (make bench-handoff HANDOFF_FLAGS=...)
#   e.g. bench/cmd/handoff/run.sh -systems temporal -levels 1x200,200x1000 -rounds 2
#   env: BENCH_DIR (binaries, default /tmp/handoffbench); TEMPORAL_CLI_VERSION (default
#   v1.5.1, the newest release `go install` can build: v1.9.1's go.mod has a replace
#   directive). The Switchyard side needs the test stores: eval "$(scripts/stack.sh env test)".
#   JSON lines go to stdout (tee'd to $BENCH_DIR/handoff.jsonl), the summary to stderr.
set -euo pipefail
cd "$(dirname "$0")/../../.."
B=${BENCH_DIR:-/tmp/handoffbench}; mkdir -p "$B"
V=${TEMPORAL_CLI_VERSION:-v1.5.1}
# The Temporal CLI (`temporal server start-dev`) from the Go module proxy, built once per version.
if [ ! -x "$B/temporal-$V" ]; then
  GOBIN="$B/gobin" go install "github.com/temporalio/cli/cmd/temporal@$V"
  mv "$B/gobin/temporal" "$B/temporal-$V"
fi
# The Temporal side is a module of its own, outside go.work (see bench/temporal/go.mod).
(cd bench/temporal && GOWORK=off go build -o "$B/temporalhandoff" ./cmd/temporalhandoff)
go build -o "$B/handoff" ./bench/cmd/handoff
"$B/handoff" -temporal-server "$B/temporal-$V" -temporal-bench "$B/temporalhandoff" "$@" | tee "$B/handoff.jsonl"
