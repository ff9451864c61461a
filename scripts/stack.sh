#!/usr/bin/env bash
# stack.sh — PostgreSQL and Redis on loopback for `make run`, `make test` and `make faults`,
# data under .run/.
#
#   scripts/stack.sh start PROFILE        install (Debian) if missing, init and start what is not
#                                         running; idempotent (also restarts a crashed server)
#   scripts/stack.sh stop  PROFILE        stop what start started
#   scripts/stack.sh env   PROFILE        print the export lines for the profile's URLs
#   scripts/stack.sh crash PROFILE postgres|redis
#                                         crash one server as a fault would: Postgres
#                                         `pg_ctl stop -m immediate` (crash recovery on the next
#                                         start), Redis `kill -9` (what its append-only file has
#                                         is what comes back); `start` brings it back
#
# Profiles: run    — Postgres 127.0.0.1:25432, Redis 127.0.0.1:26379, data in .run/
#           test   — Postgres 127.0.0.1:25433, Redis 127.0.0.1:26380, data in .run/test/ (fsync off)
#           faults — Postgres 127.0.0.1:25434, Redis 127.0.0.1:26381, data in .run/faults/; durable
#                    like run (the fault suite kills these servers, never the others)
# Ports can be moved with SWITCHYARD_PG_PORT and SWITCHYARD_REDIS_PORT, the data directory with
# SWITCHYARD_STACK_DIR. The default ports lie below Linux's ephemeral range (32768-60999), so no
# client socket can ever hold them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
profile=${2:-run}

case "$profile" in
  run)    dir="$root/.run";        pg_port=${SWITCHYARD_PG_PORT:-25432}; redis_port=${SWITCHYARD_REDIS_PORT:-26379} ;;
  test)   dir="$root/.run/test";   pg_port=${SWITCHYARD_PG_PORT:-25433}; redis_port=${SWITCHYARD_REDIS_PORT:-26380} ;;
  faults) dir="$root/.run/faults"; pg_port=${SWITCHYARD_PG_PORT:-25434}; redis_port=${SWITCHYARD_REDIS_PORT:-26381} ;;
  *) echo "stack.sh: unknown profile '$profile' (want run, test or faults)" >&2; exit 2 ;;
esac
dir=${SWITCHYARD_STACK_DIR:-$dir}
pg_dir="$dir/postgres"
redis_dir="$dir/redis"
mkdir -p "$dir/logs"

say() { echo "stack[$profile]: $*" >&2; }
die() { echo "stack[$profile]: error: $*" >&2; exit 1; }

pg_bindir() {
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/pg_ctl" ]; then pg_config --bindir; return; fi
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(command -v pg_ctl)"; return; fi
}

install_missing() {
  local pkgs=()
  [ -n "$(pg_bindir)" ] || pkgs+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
  [ ${#pkgs[@]} -eq 0 ] && return
  command -v apt-get >/dev/null 2>&1 || die "missing ${pkgs[*]} and this is not a Debian/Ubuntu machine: install them and put them on PATH"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing ${pkgs[*]} (Debian packages)"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  # The packages start system-wide servers on the default ports; we run our own.
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# as_pg runs a command as the user that owns the Postgres data (postgres refuses root).
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_running() { [ -f "$pg_dir/postmaster.pid" ] && as_pg "$(pg_bindir)/pg_ctl" -D "$pg_dir" status >/dev/null 2>&1; }

start_pg() {
  local bin; bin=$(pg_bindir)
  if pg_running; then say "postgres already running on $pg_port"; return; fi
  port_open "$pg_port" && die "port $pg_port is taken by another program: stop it, or set SWITCHYARD_PG_PORT"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    mkdir -p "$pg_dir"; chown postgres "$pg_dir"; chmod 700 "$pg_dir"
    chown postgres "$dir/logs"
  fi
  if [ ! -f "$pg_dir/PG_VERSION" ]; then
    say "initialising postgres in $pg_dir"
    as_pg "$bin/initdb" -D "$pg_dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    {
      echo "listen_addresses = '127.0.0.1'"
      echo "port = $pg_port"
      echo "unix_socket_directories = '$pg_dir'"
      echo "max_connections = 400"
      echo "shared_buffers = 128MB"
      echo "log_min_messages = warning"
      if [ "$profile" = test ]; then
        echo "fsync = off"; echo "synchronous_commit = off"; echo "full_page_writes = off"
      fi
      # After a crash Postgres syncs its data directory before recovery: one syncfs instead
      # of an fsync per file makes the faults profile's restarts seconds shorter.
      if [ "$profile" = faults ]; then echo "recovery_init_sync_method = syncfs"; fi
      # Extra settings for a benchmark's own stores, one per line, e.g.
      # SWITCHYARD_PG_EXTRA_CONF="shared_preload_libraries = 'pg_stat_statements'".
      if [ -n "${SWITCHYARD_PG_EXTRA_CONF:-}" ]; then printf '%s\n' "$SWITCHYARD_PG_EXTRA_CONF"; fi
    } >> "$pg_dir/postgresql.conf"
  fi
  # The port is given at start too, so a data directory made with another port follows it.
  as_pg "$bin/pg_ctl" -D "$pg_dir" -l "$dir/logs/postgres.log" -o "-p $pg_port" -w -t 60 start >/dev/null ||
    die "postgres did not start; see $dir/logs/postgres.log"
  if [ "$profile" != test ]; then
    as_pg "$bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='switchyard'" | grep -q 1 ||
      as_pg "$bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres switchyard
  fi
  say "postgres on 127.0.0.1:$pg_port"
}

redis_running() { [ -f "$redis_dir/redis.pid" ] && kill -0 "$(cat "$redis_dir/redis.pid")" 2>/dev/null; }

start_redis() {
  if redis_running; then say "redis already running on $redis_port"; return; fi
  port_open "$redis_port" && die "port $redis_port is taken by another program: stop it, or set SWITCHYARD_REDIS_PORT"
  mkdir -p "$redis_dir"
  local persist=(--appendonly yes --save "")
  [ "$profile" = test ] && persist=(--appendonly no --save "")
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$redis_dir" --daemonize yes \
    --pidfile "$redis_dir/redis.pid" --logfile "$dir/logs/redis.log" --databases 1024 \
    --protected-mode yes "${persist[@]}" >/dev/null
  for _ in $(seq 1 100); do port_open "$redis_port" && break; sleep 0.05; done
  port_open "$redis_port" || die "redis did not start; see $dir/logs/redis.log"
  # A Redis loading its append-only file answers LOADING until it is done: wait for PONG.
  if command -v redis-cli >/dev/null 2>&1; then
    for _ in $(seq 1 1200); do
      [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" = PONG ] && break
      sleep 0.05
    done
    [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" = PONG ] ||
      die "redis did not become ready within 60 s; see $dir/logs/redis.log"
  fi
  say "redis on 127.0.0.1:$redis_port"
}

crash() {
  local bin; bin=$(pg_bindir)
  case "$1" in
    postgres)
      pg_running || die "postgres is not running"
      as_pg "$bin/pg_ctl" -D "$pg_dir" -m immediate -w stop >/dev/null
      say "postgres stopped immediately (crash recovery on the next start)"
      ;;
    redis)
      redis_running || die "redis is not running"
      local pid; pid=$(cat "$redis_dir/redis.pid")
      kill -KILL "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -0 "$pid" 2>/dev/null && die "redis (pid $pid) survived kill -9"
      say "redis killed (kill -9)"
      ;;
    *) echo "usage: scripts/stack.sh crash PROFILE postgres|redis" >&2; exit 2 ;;
  esac
}

stop_all() {
  local bin; bin=$(pg_bindir)
  if [ -n "$bin" ] && pg_running; then as_pg "$bin/pg_ctl" -D "$pg_dir" -m fast -w stop >/dev/null && say "postgres stopped"; fi
  if redis_running; then
    local pid; pid=$(cat "$redis_dir/redis.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    say "redis stopped"
  fi
}

print_env() {
  local db=switchyard
  [ "$profile" = test ] && db=postgres
  echo "export SWITCHYARD_DATABASE_URL='postgres://postgres@127.0.0.1:$pg_port/$db?sslmode=disable'"
  echo "export SWITCHYARD_REDIS_URL='redis://127.0.0.1:$redis_port/0'"
  if [ "$profile" = test ]; then
    echo "export SWITCHYARD_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable'"
    echo "export SWITCHYARD_TEST_REDIS_URL='redis://127.0.0.1:$redis_port/0'"
  fi
}

case "$cmd" in
  start) install_missing; start_pg; start_redis ;;
  stop) stop_all ;;
  env) print_env ;;
  crash) crash "${3:-}" ;;
  *) echo "usage: scripts/stack.sh start|stop|env PROFILE, or crash PROFILE postgres|redis (PROFILE: run, test or faults)" >&2; exit 2 ;;
esac
