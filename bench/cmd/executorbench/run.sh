#!/usr/bin/env bash
# Executor benchmark on its own Redis (port 56417) and database (execbench) of the test Postgres.
# Usage: bench/cmd/executorbench/run.sh [executorbench flags]
#   env: PGURL, POOL, LAB, SWITCHYARD_TASK_CHECK_INTERVAL; EXEC_ENV (extra environment for the
#   executor only, e.g. EXEC_ENV=GOMAXPROCS=8); BENCH_DIR (binaries and logs, default
#   /tmp/executorbench); NO_BUILD=1 runs the binaries already in BENCH_DIR (e.g. a baseline
#   built from another commit).
set -euo pipefail
cd "$(dirname "$0")/../../.."
B=${BENCH_DIR:-/tmp/executorbench}; mkdir -p $B
if [ -z "${NO_BUILD:-}" ]; then
  for p in dispatcher/cmd/dispatcher executor/cmd/executor provider-router/cmd/provider-router provider-router/cmd/sim-llm bench/cmd/executorbench; do
    go build -o $B/$(basename $p) ./$p
  done
fi
redis-server --port 56417 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile $B/redis.pid --logfile $B/redis.log
PGURL=${PGURL:-postgres://postgres@127.0.0.1:25433}
psql "$PGURL/postgres" -qc 'DROP DATABASE IF EXISTS execbench' -c 'CREATE DATABASE execbench'
export SWITCHYARD_DATABASE_URL="$PGURL/execbench?sslmode=disable&pool_max_conns=${POOL:-16}"
export SWITCHYARD_REDIS_URL=redis://127.0.0.1:56417/0
export SWITCHYARD_ROUTER_ADDR=127.0.0.1:58090 SWITCHYARD_ROUTER_URL=http://127.0.0.1:58090
export SWITCHYARD_EXECUTOR_ADDR=127.0.0.1:58081 SWITCHYARD_DISPATCHER_ADDR=127.0.0.1:58080
echo "bench-service-key" > $B/service.key
export SWITCHYARD_SERVICE_KEY_FILE=$B/service.key SWITCHYARD_LOG_LEVEL=warn SWITCHYARD_SHUTDOWN_GRACE=1s
$B/dispatcher migrate
$B/dispatcher bootstrap --key-file $B/admin.key --skills skills --sim-url http://127.0.0.1:58099/v1
$B/sim-llm --addr 127.0.0.1:58099 --log-level warn --model 'sim-fast=output=uniform:10-30' \
  --model "sim-large=latency=${LAB:-mix:0.95*uniform:1s-5s,0.05*uniform:20s-40s},output=uniform:10-30" > $B/sim.log 2>&1 &
echo $! > $B/sim.pid
SWITCHYARD_PPROF_ADDR=127.0.0.1:58061 $B/provider-router > $B/router.log 2>&1 & echo $! > $B/router.pid
env ${EXEC_ENV:-} SWITCHYARD_PPROF_ADDR=127.0.0.1:58060 $B/executor > $B/executor.log 2>&1 & echo $! > $B/executor.pid
sleep 2
$B/executorbench -metrics http://127.0.0.1:58081/metrics "$@" || true
pids="$(cat $B/executor.pid) $(cat $B/router.pid) $(cat $B/sim.pid)"
kill $pids || true
for p in $pids; do while kill -0 "$p" 2>/dev/null; do sleep 0.2; done; done
redis-cli -p 56417 shutdown nosave || true
