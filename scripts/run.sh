#!/usr/bin/env bash
# run.sh — the whole platform on this machine, for `make run`, `make start`, `make stop`, `make status`.
#
#   scripts/run.sh [run]   build; start Postgres and Redis (scripts/stack.sh, profile run); migrate;
#                          bootstrap; start sim-llm, demo-tool, provider-router, executor, dispatcher; wait until
#                          each is healthy; print a summary; stay in the foreground. Ctrl-C (or TERM)
#                          stops the services and the run profile's Postgres and Redis.
#   scripts/run.sh start   the same, but return as soon as everything is ready (processes stay up)
#   scripts/run.sh stop    stop the services and the run profile's Postgres and Redis
#   scripts/run.sh status  show what is running
#   scripts/run.sh secrets          create (once) each process's secrets; needs .run/bin/provider-router
#   scripts/run.sh command NAME     print the command NAME is started with, one argument a line:
#                                   `env -i`, its whole environment, its binary and arguments
#
# Each process is given only its own secrets (docs/operations.md, "Secrets"): it starts from an
# empty environment (env -i) plus what it needs; the router's files are in
# .run/secrets/provider-router/, the executors' in .run/secrets/executor/, the dev CA's in
# .run/ca/ (read only by `provider-router certs`); the dispatcher, sim-llm and the demo tool
# are given none (the dispatcher gets the router's public key, .run/credentials.pub, which is not secret).
#
# Running it again while the stack is up and ready prints the summary and exits 0 without
# restarting anything (run `make stop` first to restart). A stack that is only partly up (a
# process died, or the dispatcher is not ready) has its remaining processes stopped and is
# started afresh.
#
# Environment (defaults in brackets):
#   SWITCHYARD_DISPATCHER_ADDR [127.0.0.1:8080]  SWITCHYARD_ROUTER_ADDR [127.0.0.1:8090]
#   SWITCHYARD_EXECUTOR_ADDR [127.0.0.1:8081]    SWITCHYARD_EXECUTOR_GPU_ADDR [127.0.0.1:8082]
#   SIM_LLM_ADDR [127.0.0.1:8099]                SWITCHYARD_LOG_LEVEL [info]
#   SWITCHYARD_GPU=1        also start executor-gpu
#   SWITCHYARD_NO_BUILD=1   use the binaries already in .run/bin
#   SWITCHYARD_READY_TIMEOUT [60]  seconds each process may take to become healthy
#   SWITCHYARD_PG_PORT, SWITCHYARD_REDIS_PORT    move Postgres/Redis (see scripts/stack.sh)
#   SWITCHYARD_RUN_DIR [.run]  binaries, logs, pids and secrets (Postgres and Redis data stay in .run)
# Other SWITCHYARD_*, SIM_LLM_* and DEMO_TOOL_* variables of the caller reach the services,
# except secrets (names with a KEY, KEYS, CERT, CA, SECRET, TOKEN or PASSWORD word).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

mode=${1:-run}
case "$mode" in
  run|start|stop|status|secrets) ;;
  command)
    [ $# -eq 2 ] || { echo "usage: scripts/run.sh command NAME" >&2; exit 2; } ;;
  *) echo "usage: scripts/run.sh [run|start|stop|status|secrets|command NAME]" >&2; exit 2 ;;
esac

t0=$(date +%s%N)
run_dir="${SWITCHYARD_RUN_DIR:-$root/.run}"
bin_dir="$run_dir/bin"
log_dir="$run_dir/logs"
pid_dir="$run_dir/pids"
key_file="$run_dir/admin.key"
# The platform operator's key: creates and suspends organisations (`yard orgs`).
operator_key_file="$run_dir/operator.key"
# The dev CA: only `provider-router certs` reads its private key, no service.
ca_dir="$run_dir/ca"
# Each process's own secrets, 0600 files in 0700 directories.
router_secrets="$run_dir/secrets/provider-router"
executor_secrets="$run_dir/secrets/executor"
log_level=${SWITCHYARD_LOG_LEVEL:-info}

# shown names paths under the repository relative to it, as a user would type them.
shown() { echo "${1#"$root"/}"; }

dispatcher_addr=${SWITCHYARD_DISPATCHER_ADDR:-127.0.0.1:8080}
router_addr=${SWITCHYARD_ROUTER_ADDR:-127.0.0.1:8090}
executor_addr=${SWITCHYARD_EXECUTOR_ADDR:-127.0.0.1:8081}
executor_gpu_addr=${SWITCHYARD_EXECUTOR_GPU_ADDR:-127.0.0.1:8082}
sim_addr=${SIM_LLM_ADDR:-127.0.0.1:8099}
# The demo tool endpoint of demo_react; tools/*.yaml point at this address.
demo_tool_addr=127.0.0.1:8097
ready_timeout=${SWITCHYARD_READY_TIMEOUT:-60}

# Every process this script may start, in start order; stopped in reverse order.
all_services=(sim-llm demo-tool provider-router executor executor-gpu dispatcher)
services=(sim-llm demo-tool provider-router executor)
[ "${SWITCHYARD_GPU:-0}" = 1 ] && services+=(executor-gpu)
services+=(dispatcher)

say() { echo "run: $*" >&2; }

addr_of() {
  case "$1" in
    dispatcher) echo "$dispatcher_addr" ;;
    provider-router) echo "$router_addr" ;;
    executor) echo "$executor_addr" ;;
    executor-gpu) echo "$executor_gpu_addr" ;;
    sim-llm) echo "$sim_addr" ;;
    demo-tool) echo "$demo_tool_addr" ;;
  esac
}

addr_var_of() {
  case "$1" in
    dispatcher) echo SWITCHYARD_DISPATCHER_ADDR ;;
    provider-router) echo SWITCHYARD_ROUTER_ADDR ;;
    executor) echo SWITCHYARD_EXECUTOR_ADDR ;;
    executor-gpu) echo SWITCHYARD_EXECUTOR_GPU_ADDR ;;
    sim-llm) echo SIM_LLM_ADDR ;;
    demo-tool) echo "(fixed: tools/*.yaml point at 127.0.0.1:8097)" ;;
  esac
}

# url_of turns a listen address (host:port, :port, 0.0.0.0:port) into a base URL to call it on.
url_of() {
  local addr; addr=$(addr_of "$1")
  local host=${addr%:*} port=${addr##*:}
  case "$host" in ""|0.0.0.0|"[::]"|"::") host=127.0.0.1 ;; esac
  local scheme=http
  # The router serves only mutual TLS (certificates from the dev CA in .run/tls).
  [ "$1" = provider-router ] && scheme=https
  echo "$scheme://$host:$port"
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# port_holder names the program listening on a TCP port, when ss can tell.
port_holder() {
  command -v ss >/dev/null 2>&1 || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'users:(("[^"]*",pid=[0-9]*' | head -n 1 |
    sed -E 's/users:\(\("([^"]*)",pid=([0-9]*)/ (held by \1, pid \2)/' || true
}

# pid_of prints the pid recorded for a service when that pid is still our binary (not a reused pid).
pid_of() {
  local f="$pid_dir/$1.pid" pid cmd
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  cmd=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | head -n 1) || return 1
  [ "$cmd" = "$bin_dir/$1" ] || return 1
  echo "$pid"
}

running() { pid_of "$1" >/dev/null; }

# alive: the process started for a service still exists and has not exited. Unlike running,
# it also holds in the moment after the start, while setsid or env is still exec'ing the
# service (its command line is not the binary's yet).
alive() {
  local pid state
  pid=$(cat "$pid_dir/$1.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

http_ok() {
  if [[ "$1" == https://* ]]; then
    # /healthz needs no client certificate, only trust in the dev CA.
    curl -fsS -o /dev/null --max-time 2 --cacert "$ca_dir/ca.pem" "$1" 2>/dev/null
    return
  fi
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null
  else
    local rest=${1#http://} hostport path status
    hostport=${rest%%/*}; path=/${rest#*/}
    # shellcheck disable=SC2016 # the inner script expands its own arguments
    status=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}"; printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$2" "$1" >&3; head -n 1 <&3' _ "$hostport" "$path" 2>/dev/null) || return 1
    [[ "$status" == *" 200"* ]]
  fi
}

stop_service() {
  local name=$1 pid
  if pid=$(pid_of "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do running "$name" || break; sleep 0.1; done
    if running "$name"; then
      say "$name (pid $pid) did not stop within 10 s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    say "$name stopped"
  fi
  rm -f "$pid_dir/$name.pid"
}

stop_services() {
  local i
  for ((i = ${#all_services[@]} - 1; i >= 0; i--)); do stop_service "${all_services[$i]}"; done
}

stop_everything() {
  stop_services
  "$root/scripts/stack.sh" stop run || true
}

# cleanup runs on every exit; it tears the stack down unless the stack is meant to outlive us.
cleanup_on_exit=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$cleanup_on_exit" = 1 ]; then
    say "stopping"
    stop_everything
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
  local name=$1; shift
  say "error: $*"
  if [ -f "$log_dir/$name.log" ]; then
    echo "---- last lines of .run/logs/$name.log ----" >&2
    tail -n 40 "$log_dir/$name.log" >&2 || true
    echo "----" >&2
  fi
  exit 1
}

# Variables run.sh sets for the services itself, and the knobs of the scripts: never passed
# through from the caller's environment.
run_sets=" SWITCHYARD_DATABASE_URL SWITCHYARD_REDIS_URL SWITCHYARD_LOG_LEVEL SWITCHYARD_DISPATCHER_ADDR
  SWITCHYARD_ROUTER_ADDR SWITCHYARD_EXECUTOR_ADDR SWITCHYARD_EXECUTOR_GPU_ADDR SWITCHYARD_ROUTER_URL SIM_LLM_ADDR
  SWITCHYARD_GPU SWITCHYARD_NO_BUILD SWITCHYARD_READY_TIMEOUT SWITCHYARD_RUN_DIR SWITCHYARD_PG_PORT
  SWITCHYARD_REDIS_PORT SWITCHYARD_KEEP_STACK "

# passthrough prints (NUL-separated NAME=value) what of the caller's environment a service may
# see: PATH, HOME, locale, time zone, the Go runtime's knobs, and the SWITCHYARD_*, SIM_LLM_*
# and DEMO_TOOL_* settings that are not secrets — any name with a KEY, KEYS, CERT, CA, SECRET,
# TOKEN or PASSWORD word is dropped: each service is given its own secrets by env_of.
passthrough() {
  local name
  for name in $(compgen -e); do
    case "$name" in
      PATH|HOME|USER|LANG|LC_*|TZ|TMPDIR|GOMAXPROCS|GOGC|GOMEMLIMIT|GODEBUG|GOTRACEBACK) ;;
      SWITCHYARD_TEST_*) continue ;;
      SWITCHYARD_*|SIM_LLM_*|DEMO_TOOL_*)
        [[ "_${name}_" =~ _(KEYS?|CERT|CA|SECRETS?|TOKEN|PASSWORD)_ ]] && continue
        [[ "$run_sets" == *" $name "* ]] && continue
        ;;
      *) continue ;;
    esac
    printf '%s=%s\0' "$name" "${!name}"
  done
}

# env_of sets the array envv to a service's whole environment: the passthrough, and what it
# needs — the stores for the router, the executors and the dispatcher; its own secrets for the
# router and the executors; nothing more for sim-llm and the demo tool.
env_of() {
  mapfile -d '' envv < <(passthrough)
  envv+=("SWITCHYARD_LOG_LEVEL=$log_level")
  local stores=("SWITCHYARD_DATABASE_URL=$SWITCHYARD_DATABASE_URL" "SWITCHYARD_REDIS_URL=$SWITCHYARD_REDIS_URL")
  case "$1" in
    provider-router) envv+=("${stores[@]}" "SWITCHYARD_ROUTER_ADDR=$router_addr"
      "SWITCHYARD_SERVICE_KEY_FILE=$router_secrets/service.key"
      "SWITCHYARD_ROUTER_TLS_CERT=$router_secrets/router.pem" "SWITCHYARD_ROUTER_TLS_KEY=$router_secrets/router-key.pem"
      "SWITCHYARD_ROUTER_CLIENT_CA=$router_secrets/ca.pem" "SWITCHYARD_ROUTER_KEYS_FILE=$router_secrets/router-keys.json"
      "SWITCHYARD_ROUTER_IDENTITY_FILE=$router_secrets/credentials.agekey") ;;
    executor|executor-gpu) envv+=("${stores[@]}" "SWITCHYARD_EXECUTOR_ADDR=$(addr_of "$1")"
      "SWITCHYARD_ROUTER_URL=${SWITCHYARD_ROUTER_URL:-$(url_of provider-router)}"
      "SWITCHYARD_SERVICE_KEY_FILE=$executor_secrets/service.key" "SWITCHYARD_ROUTER_CA_FILE=$executor_secrets/ca.pem"
      "SWITCHYARD_ROUTER_CERT_FILE=$executor_secrets/executor.pem" "SWITCHYARD_ROUTER_KEY_FILE=$executor_secrets/executor-key.pem") ;;
    dispatcher) envv+=("${stores[@]}" "SWITCHYARD_DISPATCHER_ADDR=$dispatcher_addr")
      # The router's public key, not a secret: the dispatcher seals provider API keys to it.
      local recipient; recipient=$(cat "$run_dir/credentials.pub" 2>/dev/null || true)
      if [ -n "$recipient" ]; then envv+=("SWITCHYARD_CREDENTIAL_RECIPIENT=$recipient"); fi ;;
  esac
}

# command_of sets the array cmd to the command a service is started with.
command_of() {
  local name=$1
  env_of "$name"
  cmd=(env -i "${envv[@]}" "$bin_dir/$name")
  case "$name" in
    sim-llm) cmd+=(--addr "$sim_addr") ;;
    demo-tool) cmd+=(--addr "$demo_tool_addr") ;;
    *) cmd+=(serve) ;;
  esac
}

# prepare_secrets creates what is missing of each process's secrets and keeps what exists: the
# service key (the router's copy and the executors' copy of the same key), the dev CA and the
# router's and executors' certificates, and the router's credential key ring.
prepare_secrets() {
  [ -x "$bin_dir/provider-router" ] || fail certs "$bin_dir/provider-router is missing (did the build produce it?)"
  (umask 077 && mkdir -p "$ca_dir" "$router_secrets" "$executor_secrets")
  migrate_shared_secrets
  if [ ! -s "$router_secrets/service.key" ]; then
    (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$router_secrets/service.key")
    say "created $(shown "$router_secrets/service.key")"
  fi
  cmp -s "$router_secrets/service.key" "$executor_secrets/service.key" ||
    install -m 600 "$router_secrets/service.key" "$executor_secrets/service.key"
  "$bin_dir/provider-router" certs --dir "$ca_dir" --router-dir "$router_secrets" --executor-dir "$executor_secrets" \
    >"$log_dir/certs.log" 2>&1 || fail certs "provider-router certs failed; see $(shown "$log_dir/certs.log")"
  "$bin_dir/provider-router" credentials keygen --file "$router_secrets/router-keys.json" >>"$log_dir/certs.log" 2>&1 ||
    fail certs "provider-router credentials keygen failed; see $(shown "$log_dir/certs.log")"
  # The router's credential identity (its private key, the router's alone) and its public
  # key for the dispatcher, which seals provider API keys it can never open again.
  "$bin_dir/provider-router" credentials identity --file "$router_secrets/credentials.agekey" \
    --public-file "$run_dir/credentials.pub" >>"$log_dir/certs.log" 2>&1 ||
    fail certs "provider-router credentials identity failed; see $(shown "$log_dir/certs.log")"
  chmod 700 "$ca_dir" "$run_dir/secrets" "$router_secrets" "$executor_secrets"
  find "$ca_dir" "$run_dir/secrets" -type f -exec chmod 600 {} +
}

# migrate_shared_secrets moves the secrets of the layout every process shared (.run/service.key,
# .run/tls/, .run/router-keys.json) to their owners, so that stored credentials stay readable
# and the CA is kept; the shared copies are removed.
migrate_shared_secrets() {
  if [ -s "$run_dir/service.key" ] && [ ! -s "$router_secrets/service.key" ]; then
    mv "$run_dir/service.key" "$router_secrets/service.key"
  fi
  rm -f "$run_dir/service.key"
  if [ -s "$run_dir/router-keys.json" ]; then
    if [ -s "$router_secrets/router-keys.json" ]; then
      say "warning: both $(shown "$run_dir/router-keys.json") and $(shown "$router_secrets/router-keys.json") exist; the router uses the second: remove the first once you know it is not needed"
    else
      mv "$run_dir/router-keys.json" "$router_secrets/router-keys.json"
      say "moved the credential key ring to $(shown "$router_secrets/router-keys.json")"
    fi
  fi
  if [ -d "$run_dir/tls" ]; then
    if [ ! -s "$ca_dir/ca-key.pem" ] && [ -s "$run_dir/tls/ca-key.pem" ]; then
      mv "$run_dir/tls/ca.pem" "$run_dir/tls/ca-key.pem" "$ca_dir/"
    fi
    rm -rf "$run_dir/tls"
    say "moved the dev CA to $(shown "$ca_dir") and removed the shared $(shown "$run_dir/tls")"
  fi
}

start_service() {
  local name=$1 log="$log_dir/$1.log"
  [ -x "$bin_dir/$name" ] || fail "$name" "$bin_dir/$name is missing (did the build produce it?)"
  [ -f "$log" ] && mv -f "$log" "$log.1"
  command_of "$name"
  # setsid: own session, so a terminal's Ctrl-C or hang-up reaches only this script, which stops
  # the services in order; and `make start` can leave them running. setsid and env exec in place,
  # so $! is the service's own pid.
  setsid "${cmd[@]}" </dev/null >>"$log" 2>&1 &
  echo "$!" >"$pid_dir/$name.pid"
}

wait_ready() {
  local name=$1 base deadline paths=(/healthz)
  base=$(url_of "$name")
  [ "$name" = dispatcher ] && paths+=(/readyz)
  deadline=$((SECONDS + ready_timeout))
  for path in "${paths[@]}"; do
    until http_ok "$base$path"; do
      alive "$name" || fail "$name" "$name exited during start-up"
      [ "$SECONDS" -lt "$deadline" ] || fail "$name" "$name: $base$path did not answer 200 within ${ready_timeout}s"
      sleep 0.1
    done
  done
}

elapsed() {
  local ms=$((($(date +%s%N) - t0) / 1000000))
  printf '%d.%01d' $((ms / 1000)) $((ms % 1000 / 100))
}

summary() {
  local key="(no key file: see .run/logs/bootstrap.log)" operator_key="(no key file)" hostport
  [ -s "$key_file" ] && key=$(cat "$key_file")
  [ -s "$operator_key_file" ] && operator_key=$(cat "$operator_key_file")
  hostport=${dispatcher_addr/#127.0.0.1:/localhost:}
  case "$hostport" in :*|0.0.0.0:*) hostport="localhost:${dispatcher_addr##*:}" ;; esac
  cat <<EOF

Switchyard is running${1:+ (ready in $1 s)}
  dispatcher       $(url_of dispatcher)   API, web UI at /ui, /healthz, /readyz, /metrics
  provider-router  $(url_of provider-router)
  executor         $(url_of executor)   /healthz, /metrics
EOF
  running executor-gpu && echo "  executor-gpu     $(url_of executor-gpu)   /healthz, /metrics"
  cat <<EOF
  sim-llm          $(url_of sim-llm)/v1
  postgres         ${SWITCHYARD_DATABASE_URL}
  redis            ${SWITCHYARD_REDIS_URL}
  logs             .run/logs/<name>.log   (e.g. tail -f .run/logs/dispatcher.log)
  pids             .run/pids/<name>.pid
  admin key        $key   (in $(shown "$key_file"))
  operator key     $operator_key   (in $(shown "$operator_key_file"): yard --key-file $(shown "$operator_key_file") orgs list)

Try:
  curl -s -X POST $hostport/api/v1/dispatch -H "Authorization: Bearer \$(cat $(shown "$key_file"))" -H 'Content-Type: application/json' -d '{"job_type":"demo_llm","payload":{"messages":[{"role":"user","content":"Hello"}]}}'

EOF
}

mkdir -p "$log_dir" "$pid_dir"
eval "$("$root/scripts/stack.sh" env run)"

case "$mode" in
  stop)
    stop_everything
    exit 0
    ;;
  secrets)
    prepare_secrets
    exit 0
    ;;
  command)
    case " ${all_services[*]} " in *" $2 "*) ;; *) echo "run.sh: unknown service '$2' (want one of ${all_services[*]})" >&2; exit 2 ;; esac
    command_of "$2"
    printf '%s\n' "${cmd[@]}"
    exit 0
    ;;
  status)
    for name in "${all_services[@]}"; do
      if pid=$(pid_of "$name"); then printf '  %-16s running, pid %s, %s\n' "$name" "$pid" "$(url_of "$name")"
      else printf '  %-16s stopped\n' "$name"; fi
    done
    if running dispatcher && http_ok "$(url_of dispatcher)/readyz"; then echo "  dispatcher /readyz: ready"; fi
    exit 0
    ;;
esac

# Already up? Then say so and leave it alone; partly up: clear the leftovers and start afresh.
up=0 down=0
for name in "${services[@]}"; do
  if running "$name"; then up=$((up + 1)); else down=$((down + 1)); fi
done
if [ "$down" -eq 0 ] && http_ok "$(url_of dispatcher)/readyz"; then
  say "the stack is already running (pids in .run/pids/): nothing to do; 'make stop' stops it"
  summary ""
  exit 0
fi
if [ "$up" -gt 0 ]; then
  say "the stack is only partly running: restarting its processes"
  stop_services
fi

# Fail fast, before building, when another program holds one of our ports.
for name in "${services[@]}"; do
  addr=$(addr_of "$name")
  host=${addr%:*}; port=${addr##*:}
  case "$host" in ""|0.0.0.0|"[::]"|"::") host=127.0.0.1 ;; esac
  if port_open "$host" "$port"; then
    say "error: port $port ($name) is already in use by another program$(port_holder "$port")."
    say "       Stop that program, or move $name with $(addr_var_of "$name")=127.0.0.1:<free port>."
    exit 1
  fi
done

cleanup_on_exit=1

if [ "${SWITCHYARD_NO_BUILD:-0}" != 1 ]; then
  say "building binaries into .run/bin"
  "$root/scripts/build.sh"
fi

"$root/scripts/stack.sh" start run

prepare_secrets

# The set-up steps run with the dispatcher's environment: no secret of the router or the executor.
env_of dispatcher
say "migrating the database"
env -i "${envv[@]}" "$bin_dir/dispatcher" migrate >"$log_dir/migrate.log" 2>&1 || fail migrate "dispatcher migrate failed"

say "bootstrapping (organisation, admin key, sim-llm provider, tools/, skills/, workflows/)"
# stdout carries the admin key: keep it out of the log; the key file is the record.
env -i "${envv[@]}" "$bin_dir/dispatcher" bootstrap --skills skills --workflows workflows --tools tools --key-file "$key_file" --operator-key-file "$operator_key_file" --sim-url "$(url_of sim-llm)/v1" \
  2>"$log_dir/bootstrap.log" >/dev/null || fail bootstrap "dispatcher bootstrap failed"
[ -f "$key_file" ] && chmod 600 "$key_file"

for name in "${services[@]}"; do
  start_service "$name"
  wait_ready "$name"
  say "$name ready on $(url_of "$name")"
done

took=$(elapsed)
summary "$took"

if [ "$mode" = start ]; then
  cleanup_on_exit=0
  echo "Started in the background. Stop with: make stop"
  exit 0
fi

echo "Press Ctrl-C to stop everything (services, Postgres and Redis of the run profile)."
while :; do
  for name in "${services[@]}"; do
    running "$name" || fail "$name" "$name exited unexpectedly"
  done
  sleep 1 &
  wait $! || true
done
