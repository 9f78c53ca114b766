#!/usr/bin/env bash
# Throwaway PostgreSQL, PgBouncer, RabbitMQ and Artemis on free ports in a scratch dir, for dev, demo and tests.
#
# Usage: scripts/services.sh COMMAND
#   start                  start the services in $OUTBOXD_SERVICES (default: pg pgbouncer rabbitmq artemis)
#   stop                   stop everything started from this scratch dir (safe to repeat)
#   status                 one line per service
#   env                    print the sourceable env file ($SCRATCH/services.env)
#   clean                  stop, then delete the scratch dir
#   restart-pg | stop-pg | start-pg                 fault tests: same port, same data
#   stop-pgbouncer | start-pgbouncer
#   stop-rabbitmq | start-rabbitmq | restart-rabbitmq
#   start-rabbitmq-cluster N   N more RabbitMQ nodes (rabbit1..rabbitN), clustered; `stop` stops them
#   kill-rabbitmq-node I       kill -9 of cluster node I
#   rabbitmqctl-node I ARGS... run rabbitmqctl against cluster node I
#   stop-artemis | start-artemis | restart-artemis
#   rabbitmqctl ARGS...    run rabbitmqctl against this scratch dir's node
#   artemis ARGS...        run the Artemis CLI of this scratch dir's instance
#   psql ARGS...           run psql against this scratch dir's cluster
#
# Scratch dir: ${OUTBOXD_SCRATCH:-$PWD/.scratch}; download cache: ${OUTBOXD_CACHE:-$HOME/.cache/outboxd}.
# Every port is chosen at start-up among free ones below the ephemeral range and kept in
# $SCRATCH/ports.env, so several scratch dirs run side by side and a restart keeps its port.
# OUTBOXD_SERVICES_TIMEOUT (seconds, default 300) bounds each service's start. PostgreSQL runs
# with fsync off unless OUTBOXD_PG_FSYNC=on.
#
# services.env exports, for the services that run: OUTBOXD_TEST_PG_URL (superuser URL),
# PGHOST PGPORT PGUSER PGDATABASE, OUTBOXD_TEST_PG_SOCKET_DIR, OUTBOXD_TEST_PG_DATA;
# OUTBOXD_TEST_PGBOUNCER_TX_URL and _SESSION_URL (the same cluster through PgBouncer in
# transaction and in session mode, any database name, pools of 2 server connections);
# OUTBOXD_TEST_RABBITMQ_URL _USER _PASSWORD _NODE; OUTBOXD_TEST_ARTEMIS_URL _USER _PASSWORD
# _CORE_URL (for the artemis CLI); OUTBOXD_TEST_RABBITMQ_CLUSTER_URLS and _NODES (space-separated,
# node 1 first, killed nodes included); OUTBOXD_TEST_TOXIPROXY (the fault proxy's server, once
# scripts/setup.sh built it); and OUTBOXD_SCRATCH, OUTBOXD_SERVICES_SH (this script).
#
# Credentials: PostgreSQL trusts loopback (user postgres), and so does PgBouncer for every
# role the cluster has (it looks them up as postgres with its auth_query). RabbitMQ has guest/guest (loopback
# only) and outboxd/outboxd-secret, both administrators of vhost "/"; a client without
# credentials (SASL ANONYMOUS) is let in as guest by the AMQP 1.0 plugin. Artemis has
# outboxd/outboxd-secret and also allows anonymous clients (created with --allow-anonymous),
# so PLAIN and ANONYMOUS can both be tested; a wrong password is still refused.
set -euo pipefail

SCRATCH=$(realpath -m "${OUTBOXD_SCRATCH:-$PWD/.scratch}")
CACHE=$(realpath -m "${OUTBOXD_CACHE:-${HOME:-/root}/.cache/outboxd}")
SELF=$(readlink -f "${BASH_SOURCE[0]}")
TOXIPROXY_BIN=$(dirname "$SELF")/../.scratch/tools/toxiproxy-server  # built by scripts/setup.sh
ENV_FILE=$SCRATCH/services.env
PORTS_FILE=$SCRATCH/ports.env
TAG=$(printf '%s' "$SCRATCH" | sha1sum | cut -c1-10)
TMP_ROOT=${TMPDIR:-/tmp}
PORT_LOCK=$TMP_ROOT/outboxd-ports.lock
PORT_CLAIMS=$TMP_ROOT/outboxd-ports.claims

PG_BIN=/usr/lib/postgresql/15/bin
RABBIT_BIN=/usr/lib/rabbitmq/bin
RABBIT_NODE=rabbit-$TAG@localhost
ARTEMIS_VERSION=2.40.0
ARTEMIS_TARBALL=apache-artemis-$ARTEMIS_VERSION-bin.tar.gz
ARTEMIS_URL=https://repo1.maven.org/maven2/org/apache/activemq/apache-artemis/$ARTEMIS_VERSION/$ARTEMIS_TARBALL
ARTEMIS_HOME=$CACHE/apache-artemis-$ARTEMIS_VERSION
ARTEMIS_DIR=$SCRATCH/artemis
ARTEMIS_INSTANCE=$ARTEMIS_DIR/broker
ARTEMIS_PID_FILE=$ARTEMIS_DIR/artemis.pid
RABBIT_DIR=$SCRATCH/rabbitmq
# The node the rabbit_* functions act on: the single node above, or a cluster node (rabbit_select).
RABBIT_KEY=RABBITMQ    # its ports: PORT[${RABBIT_KEY}_PORT] and PORT[${RABBIT_KEY}_DIST_PORT]
RABBIT_LABEL=rabbitmq  # its name in status lines
RABBIT_COOKIE=         # an Erlang cookie file the node shares (a cluster); empty: one of its own
RABBIT_KEEP_EPMD=0     # 1: other nodes share epmd, so starting or stopping this one leaves it alone
TEST_USER=outboxd
TEST_PASSWORD=outboxd-secret
START_TIMEOUT=${OUTBOXD_SERVICES_TIMEOUT:-300}

declare -A PORT=()

die() { printf 'services.sh: %s\n' "$*" >&2; exit 1; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# One status line: service, state, where, and the seconds since $4 (a now_ms value).
report() {
  local elapsed=$(($(now_ms) - $4))
  printf '%-9s %-9s %-28s %d.%03ds\n' "$1" "$2" "$3" $((elapsed / 1000)) $((elapsed % 1000))
}

# Print the end of a log file to stderr, to explain a failed start.
show_log() {
  [[ -f $1 ]] || return 0
  printf -- '--- last lines of %s ---\n' "$1" >&2
  tail -n 25 "$1" >&2
}

# --- ports -----------------------------------------------------------------

load_ports() {
  local key value
  PORT=()
  [[ -f $PORTS_FILE ]] || return 0
  while IFS='=' read -r key value; do
    [[ -n $key ]] && PORT[$key]=$value
  done <"$PORTS_FILE"
}

save_ports() {
  local key
  for key in "${!PORT[@]}"; do printf '%s=%s\n' "$key" "${PORT[$key]}"; done | sort >"$PORTS_FILE.tmp"
  mv "$PORTS_FILE.tmp" "$PORTS_FILE"
}

port_listening() { [[ -n $(ss -Htln "sport = :$1") ]]; }
port_in_use() { [[ -n $(ss -Htan "sport = :$1") ]]; }

# A claim stands while the scratch dir that made it still records the port.
prune_claims() {
  local port owner
  [[ -f $PORT_CLAIMS ]] || return 0
  while read -r port owner; do
    if [[ -f $owner/ports.env ]] && grep -q "=$port\$" "$owner/ports.env"; then
      printf '%s %s\n' "$port" "$owner"
    fi
  done <"$PORT_CLAIMS" >"$PORT_CLAIMS.tmp"
  mv "$PORT_CLAIMS.tmp" "$PORT_CLAIMS"
}

port_claimed() { [[ -f $PORT_CLAIMS ]] && grep -q "^$1 " "$PORT_CLAIMS"; }

# Random free port between 15000 and the start of the ephemeral range, so that no
# outgoing connection can sit on it; called with the claims lock held.
pick_port() {
  local low high port tries
  read -r high _ </proc/sys/net/ipv4/ip_local_port_range
  low=15000
  ((high > low + 1000)) || { low=10000; high=14999; }
  for ((tries = 0; tries < 500; tries++)); do
    port=$((low + (RANDOM * 32768 + RANDOM) % (high - low)))
    port_claimed "$port" || port_in_use "$port" || { echo "$port"; return 0; }
  done
  die "no free port found between $low and $high"
}

# Make sure each named port is set and not taken by a stranger; keeps ports across restarts.
ensure_ports() {
  local lock key changed=0
  exec {lock}>"$PORT_LOCK"
  flock "$lock"
  load_ports
  prune_claims
  for key in "$@"; do
    if [[ -z ${PORT[$key]:-} ]] || port_listening "${PORT[$key]}"; then
      [[ -n ${PORT[$key]:-} ]] && printf 'services.sh: port %s (%s) is taken, choosing another\n' "${PORT[$key]}" "$key" >&2
      PORT[$key]=$(pick_port)
      printf '%s %s\n' "${PORT[$key]}" "$SCRATCH" >>"$PORT_CLAIMS"
      changed=1
    fi
  done
  ((changed == 0)) || save_ports
  exec {lock}>&-
}

tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Our own process, checked by pid and by a marker in its command line (pids get reused).
pid_is() {
  local pid=$1 marker=$2
  [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$marker"
}

wait_gone() {
  local pid=$1 seconds=$2 i
  for ((i = 0; i < seconds * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# --- PostgreSQL ------------------------------------------------------------

pg_dir() { readlink -f "$SCRATCH/pg"; }
# From /, which the postgres user can read: PostgreSQL's tools return to the current
# directory at start-up and complain when it is out of their reach (e.g. under /root).
as_postgres() { (cd / && exec runuser -u postgres -- "$@"); }
pg_ctl() { as_postgres "$PG_BIN/pg_ctl" "$@"; }

pg_running() {
  local dir
  [[ -e $SCRATCH/pg ]] || return 1
  dir=$(pg_dir)
  [[ -f $dir/data/postmaster.pid ]] && pg_ctl status -D "$dir/data" >/dev/null 2>&1
}

# The cluster belongs to the postgres OS user (initdb refuses root). When that user
# cannot reach the scratch dir (e.g. it lies under /root), the data goes to $TMPDIR
# and $SCRATCH/pg links to it.
pg_prepare() {
  local dir sock
  if [[ ! -e $SCRATCH/pg ]]; then
    mkdir -p "$SCRATCH/pg"
    chown postgres: "$SCRATCH/pg"
    if ! as_postgres test -w "$SCRATCH/pg"; then
      rmdir "$SCRATCH/pg"
      mkdir -p "$TMP_ROOT/outboxd-pg-$TAG"
      chown postgres: "$TMP_ROOT/outboxd-pg-$TAG"
      ln -s "$TMP_ROOT/outboxd-pg-$TAG" "$SCRATCH/pg"
    fi
  fi
  dir=$(pg_dir)
  if [[ ! -f $dir/data/PG_VERSION ]]; then
    as_postgres "$PG_BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
      --locale=C --no-sync >"$dir/initdb.log" 2>&1 || { show_log "$dir/initdb.log"; return 1; }
    printf 'local all all trust\nhost all all 127.0.0.1/32 trust\n' >"$dir/data/pg_hba.conf"
    printf "\ninclude_if_exists = 'outboxd-services.conf'\n" >>"$dir/data/postgresql.conf"
  fi
  # Unix socket paths are limited to 107 bytes.
  sock=$dir/run
  ((${#sock} < 80)) || sock=$TMP_ROOT/outboxd-pg-$TAG.run
  mkdir -p "$sock"
  chown postgres: "$sock"
  [[ ${OUTBOXD_PG_FSYNC:-off} =~ ^(on|off)$ ]] || die "OUTBOXD_PG_FSYNC must be on or off, not '$OUTBOXD_PG_FSYNC'"
  cat >"$dir/data/outboxd-services.conf" <<EOF
# Written by scripts/services.sh at every start.
listen_addresses = '127.0.0.1'
port = ${PORT[PG_PORT]}
unix_socket_directories = '$sock'
max_connections = 200
# Throwaway data: no fsync (a killed server loses nothing; only a machine crash would).
# OUTBOXD_PG_FSYNC=on runs it as Debian installs it (bench/compare.sh --fsync).
fsync = ${OUTBOXD_PG_FSYNC:-off}
# The benchmark measures latency from each row's commit.
track_commit_timestamp = on
EOF
  chown postgres: "$dir/data/outboxd-services.conf"
  echo "$sock" >"$dir/socket_dir"
}

pg_start() {
  local t0 dir
  t0=$(now_ms)
  if pg_running; then
    load_ports
    report pg running "127.0.0.1:${PORT[PG_PORT]}" "$t0"
    return 0
  fi
  ensure_ports PG_PORT
  pg_prepare
  dir=$(pg_dir)
  if ! pg_ctl start -D "$dir/data" -l "$dir/postgresql.log" -w -t "$START_TIMEOUT" >/dev/null 2>&1; then
    report pg FAILED "127.0.0.1:${PORT[PG_PORT]}" "$t0"
    show_log "$dir/postgresql.log"
    return 1
  fi
  report pg started "127.0.0.1:${PORT[PG_PORT]}" "$t0"
}

pg_stop() {
  local t0
  t0=$(now_ms)
  pg_running || return 0
  pg_ctl stop -D "$(pg_dir)/data" -m fast -w -t 60 >/dev/null
  report pg stopped - "$t0"
}

# --- PgBouncer -------------------------------------------------------------

# Two small processes, one per pool mode, both in front of our cluster. They run as the
# postgres user (PgBouncer refuses root) from a dir beside the cluster, which that user
# can reach. Pools of 2 server connections, so that clients really share them.
PGBOUNCER_MODES=(transaction session)

pgbouncer_dir() { echo "$(pg_dir)/pgbouncer"; }
pgbouncer_port_key() { [[ $1 == transaction ]] && echo PGBOUNCER_TX_PORT || echo PGBOUNCER_SESSION_PORT; }

pgbouncer_running() {
  local dir
  [[ -e $SCRATCH/pg ]] || return 1
  dir=$(pgbouncer_dir)
  [[ -f $dir/$1.pid ]] && pid_is "$(<"$dir/$1.pid")" "$dir/$1.ini"
}

# trust needs the role in auth_file; auth_user looks up every other role in the cluster.
pgbouncer_prepare() {
  local mode=$1 dir
  dir=$(pgbouncer_dir)
  mkdir -p "$dir"
  printf '"postgres" ""\n' >"$dir/users.txt"
  cat >"$dir/$mode.ini" <<EOF
;; Written by scripts/services.sh at every start.
[databases]
* = host=127.0.0.1 port=${PORT[PG_PORT]}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${PORT[$(pgbouncer_port_key "$mode")]}
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
auth_user = postgres
pool_mode = $mode
default_pool_size = 2
max_client_conn = 500
logfile = $dir/$mode.log
pidfile = $dir/$mode.pid
EOF
  chown -R postgres: "$dir"
}

pgbouncer_start_mode() {
  local mode=$1 name t0 key dir
  name=pgb-${mode:0:4}
  t0=$(now_ms)
  key=$(pgbouncer_port_key "$mode")
  if pgbouncer_running "$mode"; then
    report "$name" running "127.0.0.1:${PORT[$key]}" "$t0"
    return 0
  fi
  pg_running || { report "$name" FAILED "(pg is not running)" "$t0"; return 1; }
  ensure_ports "$key"
  pgbouncer_prepare "$mode"
  dir=$(pgbouncer_dir)
  if ! runuser -u postgres -- /usr/sbin/pgbouncer -d "$dir/$mode.ini" >"$dir/$mode.start.log" 2>&1; then
    report "$name" FAILED "127.0.0.1:${PORT[$key]}" "$t0"
    show_log "$dir/$mode.start.log"
    show_log "$dir/$mode.log"
    return 1
  fi
  local deadline=$(($(now_ms) + START_TIMEOUT * 1000))
  until tcp_open "${PORT[$key]}"; do
    if (($(now_ms) > deadline)); then
      report "$name" FAILED "127.0.0.1:${PORT[$key]}" "$t0"
      show_log "$dir/$mode.log"
      return 1
    fi
    sleep 0.1
  done
  report "$name" started "127.0.0.1:${PORT[$key]}" "$t0"
}

pgbouncer_start() {
  local mode
  load_ports
  for mode in "${PGBOUNCER_MODES[@]}"; do pgbouncer_start_mode "$mode" || return 1; done
}

# SIGTERM: PgBouncer's immediate shutdown; nothing in these pools is worth waiting for.
pgbouncer_stop() {
  local t0 mode pid
  t0=$(now_ms)
  for mode in "${PGBOUNCER_MODES[@]}"; do
    pgbouncer_running "$mode" || continue
    pid=$(<"$(pgbouncer_dir)/$mode.pid")
    kill -TERM "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || { kill -KILL "$pid" 2>/dev/null || true; }
    report "pgb-${mode:0:4}" stopped - "$t0"
  done
}

# --- RabbitMQ --------------------------------------------------------------

# Everything that both rabbitmq-server and rabbitmqctl read; HOME holds the Erlang cookie.
rabbit_env() {
  load_ports
  export HOME=$RABBIT_DIR/home
  export RABBITMQ_NODENAME=$RABBIT_NODE
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  export RABBITMQ_NODE_PORT=${PORT[${RABBIT_KEY}_PORT]:-}
  export RABBITMQ_DIST_PORT=${PORT[${RABBIT_KEY}_DIST_PORT]:-}
  export ERL_EPMD_PORT=${PORT[EPMD_PORT]:-}
  export ERL_EPMD_ADDRESS=127.0.0.1
  export RABBITMQ_MNESIA_BASE=$RABBIT_DIR/mnesia
  export RABBITMQ_LOG_BASE=$RABBIT_DIR/log
  export RABBITMQ_PID_FILE=$RABBIT_DIR/rabbitmq.pid
  export RABBITMQ_ENABLED_PLUGINS_FILE=$RABBIT_DIR/enabled_plugins
  export RABBITMQ_CONFIG_FILE=$RABBIT_DIR/rabbitmq.conf
  export RABBITMQ_ADVANCED_CONFIG_FILE=$RABBIT_DIR/advanced.config
  export RABBITMQ_CONF_ENV_FILE=$RABBIT_DIR/rabbitmq-env.conf
  export RABBITMQ_PLUGINS_DIR=$RABBIT_DIR/plugins
  # Erlang distribution (node and CLI) listens on loopback only, like everything else here.
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'
  export RABBITMQ_CTL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'
}

rabbitmqctl() { (rabbit_env && "$RABBIT_BIN/rabbitmqctl" "$@"); }

rabbit_running() {
  local pid
  [[ -f $RABBIT_DIR/rabbitmq.pid ]] || return 1
  pid=$(<"$RABBIT_DIR/rabbitmq.pid")
  pid_is "$pid" "-home $RABBIT_DIR/home"
}

# Users are loaded from a definitions file at boot: one boot, no rabbitmqctl round trips.
rabbit_definitions() {
  /usr/bin/python3 - "$TEST_USER" "$TEST_PASSWORD" <<'EOF'
import base64, hashlib, json, os, sys

def password_hash(password):
    salt = os.urandom(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()

users = [("guest", "guest"), (sys.argv[1], sys.argv[2])]
print(json.dumps({
    "users": [{"name": name, "password_hash": password_hash(password),
               "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"]}
              for name, password in users],
    "vhosts": [{"name": "/"}],
    "permissions": [{"user": name, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
                    for name, _ in users],
}, indent=1))
EOF
}

rabbit_prepare() {
  mkdir -p "$RABBIT_DIR/home" "$RABBIT_DIR/mnesia" "$RABBIT_DIR/log"
  if [[ -n $RABBIT_COOKIE ]]; then
    install -m 400 "$RABBIT_COOKIE" "$RABBIT_DIR/home/.erlang.cookie"
  elif [[ ! -f $RABBIT_DIR/home/.erlang.cookie ]]; then
    (umask 077 && head -c 32 /dev/urandom | sha256sum | cut -c1-40 >"$RABBIT_DIR/home/.erlang.cookie")
    chmod 400 "$RABBIT_DIR/home/.erlang.cookie"
  fi
  [[ -f $RABBIT_DIR/definitions.json ]] || rabbit_definitions >"$RABBIT_DIR/definitions.json"
  # Only the broker's own apps and the AMQP 1.0 plugin: every plugin in the dir costs boot
  # time (config schemas, module scans) even when it is not enabled.
  if [[ ! -d $RABBIT_DIR/plugins ]]; then
    local all app
    all=$(dirname "$(readlink -f "$RABBIT_BIN/rabbitmq-server")")/../plugins
    mkdir -p "$RABBIT_DIR/plugins"
    for app in "$all"/*/; do
      app=$(basename "$app")
      case $app in
        rabbitmq_prelaunch-* | rabbitmq_amqp1_0-*) ;;
        rabbitmq_*) continue ;;
      esac
      ln -s "$(readlink -f "$all/$app")" "$RABBIT_DIR/plugins/$app"
    done
  fi
  echo '[rabbitmq_amqp1_0].' >"$RABBIT_DIR/enabled_plugins"
  : >"$RABBIT_DIR/rabbitmq-env.conf"
  cat >"$RABBIT_DIR/rabbitmq.conf" <<EOF
# Written by scripts/services.sh at every start.
listeners.tcp.default = 127.0.0.1:${PORT[${RABBIT_KEY}_PORT]}
load_definitions = $RABBIT_DIR/definitions.json
log.file.level = info
log.console = false
EOF
}

# Ready means the boot finished ("Server startup complete": definitions loaded, listener up)
# and the port accepts. Reading the log costs nothing, unlike a rabbitmqctl round trip that
# boots another Erlang VM next to the broker.
rabbit_start() {
  local t0 pid log offset deadline
  t0=$(now_ms)
  if rabbit_running; then
    load_ports
    report "$RABBIT_LABEL" running "127.0.0.1:${PORT[${RABBIT_KEY}_PORT]}" "$t0"
    return 0
  fi
  # After a kill -9 of the node its epmd is still there, holding our epmd port.
  load_ports
  if ((RABBIT_KEEP_EPMD)); then
    ensure_ports "${RABBIT_KEY}_PORT" "${RABBIT_KEY}_DIST_PORT"  # epmd runs for every node
  else
    epmd_stop
    ensure_ports "${RABBIT_KEY}_PORT" "${RABBIT_KEY}_DIST_PORT" EPMD_PORT
  fi
  rabbit_prepare
  rm -f "$RABBIT_DIR/rabbitmq.pid"
  log=$RABBIT_DIR/log/$RABBIT_NODE.log
  offset=$(($(stat -c %s "$log" 2>/dev/null || echo 0) + 1))
  if ! (rabbit_env && cd "$RABBIT_DIR" && exec "$RABBIT_BIN/rabbitmq-server" -detached) >"$RABBIT_DIR/start.log" 2>&1; then
    report "$RABBIT_LABEL" FAILED "127.0.0.1:${PORT[${RABBIT_KEY}_PORT]}" "$t0"
    show_log "$RABBIT_DIR/start.log"
    return 1
  fi
  deadline=$(($(now_ms) + START_TIMEOUT * 1000))
  until tail -c "+$offset" "$log" 2>/dev/null | grep -q 'Server startup complete' && tcp_open "${PORT[${RABBIT_KEY}_PORT]}"; do
    pid=$(cat "$RABBIT_DIR/rabbitmq.pid" 2>/dev/null || true)
    if (($(now_ms) > deadline)) || { [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; }; then
      report "$RABBIT_LABEL" FAILED "127.0.0.1:${PORT[${RABBIT_KEY}_PORT]}" "$t0"
      show_log "$RABBIT_DIR/start.log"
      show_log "$log"
      [[ -z $pid ]] || kill -KILL "$pid" 2>/dev/null || true
      ((RABBIT_KEEP_EPMD)) || epmd_stop
      return 1
    fi
    sleep 0.2
  done
  report "$RABBIT_LABEL" started "127.0.0.1:${PORT[${RABBIT_KEY}_PORT]}" "$t0"
}

# epmd outlives the node; ours listens on our own port, so stop it by that port's pid.
epmd_stop() {
  local port=${PORT[EPMD_PORT]:-} pid
  [[ -n $port ]] || return 0
  for pid in $(ss -Htlnp "sport = :$port" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
    if pid_is "$pid" epmd; then
      kill "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || true
    fi
  done
}

# SIGTERM is RabbitMQ's graceful shutdown (same as rabbitmqctl stop, without booting the CLI).
rabbit_stop() {
  local t0 pid
  t0=$(now_ms)
  load_ports
  if rabbit_running; then
    pid=$(<"$RABBIT_DIR/rabbitmq.pid")
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" 60; then
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || true
    fi
    report "$RABBIT_LABEL" stopped - "$t0"
  fi
  ((RABBIT_KEEP_EPMD)) || epmd_stop
}

# shellcheck source=scripts/services_rabbitmq_cluster.sh
source "$(dirname "$SELF")/services_rabbitmq_cluster.sh"

# --- Apache ActiveMQ Artemis -----------------------------------------------

# Download once, verify against the published SHA-512, unpack once; concurrent starts share it.
artemis_fetch() {
  local lock want got
  [[ -x $ARTEMIS_HOME/bin/artemis ]] && return 0
  mkdir -p "$CACHE"
  exec {lock}>"$CACHE/.lock"
  flock "$lock"
  if [[ ! -x $ARTEMIS_HOME/bin/artemis ]]; then
    [[ -f $CACHE/$ARTEMIS_TARBALL.sha512 ]] ||
      curl -fsSL --retry 3 -o "$CACHE/$ARTEMIS_TARBALL.sha512" "$ARTEMIS_URL.sha512"
    want=$(cut -d' ' -f1 <"$CACHE/$ARTEMIS_TARBALL.sha512")
    if [[ ! -f $CACHE/$ARTEMIS_TARBALL ]] || [[ $(sha512sum <"$CACHE/$ARTEMIS_TARBALL" | cut -d' ' -f1) != "$want" ]]; then
      curl -fsSL --retry 3 -o "$CACHE/$ARTEMIS_TARBALL.part" "$ARTEMIS_URL"
      mv "$CACHE/$ARTEMIS_TARBALL.part" "$CACHE/$ARTEMIS_TARBALL"
    fi
    got=$(sha512sum <"$CACHE/$ARTEMIS_TARBALL" | cut -d' ' -f1)
    if [[ $got != "$want" ]]; then
      rm -f "$CACHE/$ARTEMIS_TARBALL"
      die "$ARTEMIS_TARBALL: SHA-512 mismatch (got $got, want $want)"
    fi
    rm -rf "$CACHE/unpack.tmp"
    mkdir -p "$CACHE/unpack.tmp"
    tar -xzf "$CACHE/$ARTEMIS_TARBALL" -C "$CACHE/unpack.tmp"
    mv "$CACHE/unpack.tmp/apache-artemis-$ARTEMIS_VERSION" "$ARTEMIS_HOME"
    rmdir "$CACHE/unpack.tmp"
  fi
  exec {lock}>&-
}

# The acceptors are rewritten at every start: AMQP and CORE (for the artemis CLI), both on
# loopback and on ports of our choosing; nothing else listens.
artemis_acceptors() {
  local xml=$ARTEMIS_INSTANCE/etc/broker.xml
  local core="         <acceptor name=\"core\">tcp://127.0.0.1:${PORT[ARTEMIS_CORE_PORT]}?protocols=CORE;useEpoll=true</acceptor>"
  local amqp="         <acceptor name=\"amqp\">tcp://127.0.0.1:${PORT[ARTEMIS_PORT]}?protocols=AMQP;useEpoll=true;amqpCredits=1000;amqpLowCredits=300;amqpMinLargeMessageSize=102400;amqpDuplicateDetection=true</acceptor>"
  awk -v core="$core" -v amqp="$amqp" '
    /<acceptors>/ { print; print core; print amqp; skip = 1; next }
    /<\/acceptors>/ { skip = 0 }
    !skip { print }' "$xml" >"$xml.tmp"
  mv "$xml.tmp" "$xml"
}

artemis_prepare() {
  artemis_fetch
  if [[ ! -f $ARTEMIS_INSTANCE/etc/broker.xml ]]; then
    mkdir -p "$ARTEMIS_DIR"
    "$ARTEMIS_HOME/bin/artemis" create "$ARTEMIS_INSTANCE" --silent --force \
      --user "$TEST_USER" --password "$TEST_PASSWORD" --allow-anonymous \
      --no-web --no-autotune --nio --no-fsync --host 127.0.0.1 --java-memory 512M \
      --no-hornetq-acceptor --no-mqtt-acceptor --no-stomp-acceptor >"$ARTEMIS_DIR/create.log" 2>&1 ||
      { show_log "$ARTEMIS_DIR/create.log"; return 1; }
    # A small journal; NIO because mapped files buy nothing here.
    sed -i -e 's|<journal-type>[A-Z]*</journal-type>|<journal-type>NIO</journal-type>|' \
      -e 's|<journal-file-size>[^<]*</journal-file-size>|<journal-file-size>1M</journal-file-size>|' \
      -e 's|<journal-pool-files>[^<]*</journal-pool-files>|<journal-pool-files>2</journal-pool-files>|' \
      "$ARTEMIS_INSTANCE/etc/broker.xml"
    sed -i -e 's/-Xms[0-9]*[MmGg]/-Xms64M/' "$ARTEMIS_INSTANCE/etc/artemis.profile"
    # Anonymous clients are let in, but a client that brings a wrong password is refused
    # instead of being let in as the guest.
    sed -i -e 's|\(org.apache.activemq.jaas.guest.role="[^"]*"\);|\1\n       credentialsInvalidate=true;|' \
      "$ARTEMIS_INSTANCE/etc/login.config"
  fi
  artemis_acceptors
}

artemis_running() {
  [[ -f $ARTEMIS_PID_FILE ]] && pid_is "$(<"$ARTEMIS_PID_FILE")" "artemis.instance=$ARTEMIS_INSTANCE"
}

artemis_start() {
  local t0 pid deadline
  t0=$(now_ms)
  if artemis_running; then
    load_ports
    report artemis running "127.0.0.1:${PORT[ARTEMIS_PORT]}" "$t0"
    return 0
  fi
  ensure_ports ARTEMIS_PORT ARTEMIS_CORE_PORT
  artemis_prepare
  # setsid: the broker leaves our process group, so a Ctrl-C aimed at a test run does not hit it.
  # bin/artemis execs java, so $! is the JVM's pid.
  (cd "$ARTEMIS_INSTANCE" && exec setsid nohup bin/artemis run >"$ARTEMIS_DIR/artemis.out" 2>&1 </dev/null) &
  pid=$!
  echo "$pid" >"$ARTEMIS_PID_FILE"
  deadline=$(($(now_ms) + START_TIMEOUT * 1000))
  # Live (AMQ221007) and the AMQP acceptor accepting connections.
  until grep -q 'AMQ221007' "$ARTEMIS_DIR/artemis.out" 2>/dev/null && tcp_open "${PORT[ARTEMIS_PORT]}"; do
    if ! kill -0 "$pid" 2>/dev/null || (($(now_ms) > deadline)); then
      report artemis FAILED "127.0.0.1:${PORT[ARTEMIS_PORT]}" "$t0"
      show_log "$ARTEMIS_DIR/artemis.out"
      kill -KILL "$pid" 2>/dev/null || true
      rm -f "$ARTEMIS_PID_FILE"
      return 1
    fi
    sleep 0.2
  done
  report artemis started "127.0.0.1:${PORT[ARTEMIS_PORT]}" "$t0"
}

artemis_stop() {
  local t0 pid
  t0=$(now_ms)
  artemis_running || { rm -f "$ARTEMIS_PID_FILE"; return 0; }
  pid=$(<"$ARTEMIS_PID_FILE")
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" 30; then
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || true
  fi
  rm -f "$ARTEMIS_PID_FILE"
  report artemis stopped - "$t0"
}

artemis_cli() {
  [[ -x $ARTEMIS_INSTANCE/bin/artemis ]] || die "no Artemis instance in $ARTEMIS_INSTANCE"
  "$ARTEMIS_INSTANCE/bin/artemis" "$@"
}

# --- env file ----------------------------------------------------------------

# Lists only the services that are running, so tests can skip what is absent.
write_env() {
  load_ports
  {
    echo "# Written by scripts/services.sh; source it."
    echo "export OUTBOXD_SCRATCH='$SCRATCH'"
    echo "export OUTBOXD_SERVICES_SH='$SELF'"
    if [[ -x $TOXIPROXY_BIN ]]; then
      echo "export OUTBOXD_TEST_TOXIPROXY='$(realpath "$TOXIPROXY_BIN")'"
    fi
    if pg_running; then
      echo "export OUTBOXD_TEST_PG_URL='postgresql://postgres@127.0.0.1:${PORT[PG_PORT]}/postgres'"
      echo "export PGHOST=127.0.0.1 PGPORT=${PORT[PG_PORT]} PGUSER=postgres PGDATABASE=postgres"
      echo "export OUTBOXD_TEST_PG_SOCKET_DIR='$(<"$(pg_dir)/socket_dir")'"
      echo "export OUTBOXD_TEST_PG_DATA='$(pg_dir)/data'"
    fi
    if pgbouncer_running transaction; then
      echo "export OUTBOXD_TEST_PGBOUNCER_TX_URL='postgresql://postgres@127.0.0.1:${PORT[PGBOUNCER_TX_PORT]}/postgres'"
    fi
    if pgbouncer_running session; then
      echo "export OUTBOXD_TEST_PGBOUNCER_SESSION_URL='postgresql://postgres@127.0.0.1:${PORT[PGBOUNCER_SESSION_PORT]}/postgres'"
    fi
    if rabbit_running; then
      echo "export OUTBOXD_TEST_RABBITMQ_URL='amqp://127.0.0.1:${PORT[RABBITMQ_PORT]}'"
      echo "export OUTBOXD_TEST_RABBITMQ_USER=$TEST_USER OUTBOXD_TEST_RABBITMQ_PASSWORD=$TEST_PASSWORD"
      echo "export OUTBOXD_TEST_RABBITMQ_NODE='$RABBIT_NODE'"
    fi
    if artemis_running; then
      echo "export OUTBOXD_TEST_ARTEMIS_URL='amqp://127.0.0.1:${PORT[ARTEMIS_PORT]}'"
      echo "export OUTBOXD_TEST_ARTEMIS_USER=$TEST_USER OUTBOXD_TEST_ARTEMIS_PASSWORD=$TEST_PASSWORD"
      echo "export OUTBOXD_TEST_ARTEMIS_CORE_URL='tcp://127.0.0.1:${PORT[ARTEMIS_CORE_PORT]}'"
    fi
    (cluster_env)
  } >"$ENV_FILE.tmp"
  mv "$ENV_FILE.tmp" "$ENV_FILE"
}

# --- commands --------------------------------------------------------------

DEFAULT_SERVICES="pg pgbouncer rabbitmq artemis"
selected() { [[ " ${OUTBOXD_SERVICES:-$DEFAULT_SERVICES} " == *" $1 "* ]]; }

# Runs a start function; a step that failed before it could report still gets a line.
start_one() {
  local name=$1 t0 out rc=0
  t0=$(now_ms)
  out=$("$2") || rc=$?
  [[ -z $out ]] || printf '%s\n' "$out"
  ((rc == 0)) || [[ -n $out ]] || report "$name" FAILED "(logs in $SCRATCH/$name)" "$t0"
  return "$rc"
}

start_all() {
  local t0 svc pids=() failed=0 pid
  t0=$(now_ms)
  [[ $(id -u) == 0 ]] || die "run as root (the PostgreSQL cluster is owned by the postgres user)"
  for svc in ${OUTBOXD_SERVICES:-$DEFAULT_SERVICES}; do
    [[ $svc =~ ^(pg|pgbouncer|rabbitmq|artemis)$ ]] || die "unknown service '$svc' in OUTBOXD_SERVICES"
  done
  mkdir -p "$SCRATCH"
  # Independent services start side by side; each prints its own line. PgBouncer
  # needs the cluster's port, so it starts right after PostgreSQL.
  if selected pg && selected pgbouncer; then
    (start_one pg pg_start && start_one pgbouncer pgbouncer_start) & pids+=($!)
  elif selected pg; then
    start_one pg pg_start & pids+=($!)
  elif selected pgbouncer; then
    start_one pgbouncer pgbouncer_start & pids+=($!)
  fi
  if selected rabbitmq; then start_one rabbitmq rabbit_start & pids+=($!); fi
  if selected artemis; then start_one artemis artemis_start & pids+=($!); fi
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  write_env
  report all "$( ((failed)) && echo FAILED || echo ready)" "$ENV_FILE" "$t0"
  return "$failed"
}

stop_all() {
  [[ -d $SCRATCH ]] || return 0
  local pids=() pid
  artemis_stop & pids+=($!)
  (RABBIT_KEEP_EPMD=1 && rabbit_stop) & pids+=($!)
  rabbit_cluster_stop & pids+=($!)
  (pgbouncer_stop; pg_stop) & pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  load_ports
  epmd_stop  # shared by the single node and the cluster's
  write_env
}

status_all() {
  local svc key running
  load_ports
  for svc in pg:PG_PORT:pg_running pgb-tran:PGBOUNCER_TX_PORT:"pgbouncer_running transaction" \
    pgb-sess:PGBOUNCER_SESSION_PORT:"pgbouncer_running session" rabbitmq:RABBITMQ_PORT:rabbit_running artemis:ARTEMIS_PORT:artemis_running; do
    IFS=: read -r svc key running <<<"$svc"
    if $running; then
      printf '%-9s %-9s 127.0.0.1:%s\n' "$svc" running "${PORT[$key]}"
    else
      printf '%-9s %-9s\n' "$svc" stopped
    fi
  done
}

# Single-service commands for fault tests; the env file is rewritten so it lists what runs.
one() {
  mkdir -p "$SCRATCH"
  "$@"
  write_env
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case $cmd in
    start) start_all ;;
    stop) stop_all ;;
    status) status_all ;;
    env) [[ -f $ENV_FILE ]] || die "no $ENV_FILE: run start first"; cat "$ENV_FILE" ;;
    clean)
      stop_all
      [[ -L $SCRATCH/pg ]] && rm -rf "$(pg_dir)"
      rm -rf "$SCRATCH" "$TMP_ROOT/outboxd-pg-$TAG.run"
      ;;
    start-pg) one pg_start ;;
    start-pgbouncer) one pgbouncer_start ;;
    stop-pgbouncer) one pgbouncer_stop ;;
    stop-pg) one pg_stop ;;
    restart-pg) one pg_stop && one pg_start ;;
    start-rabbitmq) one rabbit_start ;;
    stop-rabbitmq) one rabbit_stop ;;
    restart-rabbitmq) one rabbit_stop && one rabbit_start ;;
    start-rabbitmq-cluster) one rabbit_cluster_start "$@" ;;
    kill-rabbitmq-node) one rabbit_cluster_kill "$@" ;;
    rabbitmqctl-node) rabbit_select "${1:?give the node number}" && shift && rabbitmqctl "$@" ;;
    start-artemis) one artemis_start ;;
    stop-artemis) one artemis_stop ;;
    restart-artemis) one artemis_stop && one artemis_start ;;
    rabbitmqctl) rabbitmqctl "$@" ;;
    artemis) artemis_cli "$@" ;;
    psql)
      load_ports
      PGHOST=127.0.0.1 PGPORT=${PORT[PG_PORT]:?pg was never started} PGUSER=postgres exec psql -X "$@"
      ;;
    *) sed -n '2,/^set -euo/p' "$SELF" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
}

main "$@"
