# RabbitMQ cluster nodes for scripts/services.sh (sourced by it): N nodes, one Erlang cookie, one epmd.
#
# Each node is the services.sh RabbitMQ node (its env, definitions file, AMQP 1.0 plugin only)
# with a name, ports and data dir of its own, chosen by rabbit_select. The nodes boot side by
# side, each as a cluster of one; then nodes 2..N join node 1, one after the other.
# shellcheck shell=bash

CLUSTER_COOKIE=$SCRATCH/rabbitmq-cluster.cookie

# Points the rabbit_* functions at cluster node $1 (1-based); call it in a subshell, the
# single node's functions read the same variables.
# shellcheck disable=SC2034  # read by the rabbit_* functions of services.sh
rabbit_select() {
  RABBIT_DIR=$SCRATCH/rabbitmq-$1
  RABBIT_NODE=rabbit$1-$TAG@localhost
  RABBIT_KEY=RABBITMQ$1
  RABBIT_LABEL=rabbit$1
  RABBIT_COOKIE=$CLUSTER_COOKIE
  RABBIT_KEEP_EPMD=1
}

# The cluster nodes made in this scratch dir, running or not, in order.
cluster_nodes() {
  local i=1
  while [[ -d $SCRATCH/rabbitmq-$i ]]; do
    echo "$i"
    i=$((i + 1))
  done
}

cluster_any_running() {
  local i
  for i in $(cluster_nodes); do
    (rabbit_select "$i" && rabbit_running) && return 0
  done
  return 1
}

# Node $1 leaves its cluster of one for node 1's: stop, join_cluster and start in one eval, so
# one CLI boot instead of three. Nodes join one at a time: two joining the seed at once race in
# Mnesia's schema merge, and the loser's start fails ({mnesia_app, start}). A join that fails all
# the same is tried once more from a forced reset, which forgets the half-made membership.
rabbit_join() {
  local seed attempt prepare=""
  seed=$(rabbit_select 1 && echo "$RABBIT_NODE")
  (
    rabbit_select "$1"
    for attempt in 1 2; do
      rabbitmqctl eval "_ = rabbit:stop(), $prepare
        case rabbit_mnesia:join_cluster('$seed', disc) of ok -> ok; {ok, already_member} -> ok end,
        ok = rabbit:start()." >"$RABBIT_DIR/join.log" 2>&1 && exit 0
      cp "$RABBIT_DIR/join.log" "$RABBIT_DIR/join-$attempt.log"
      prepare="ok = rabbit_mnesia:force_reset(),"
    done
    show_log "$RABBIT_DIR/join.log"
    exit 1
  )
}

rabbit_cluster_start() {
  local count=${1:-} t0 i pid pids=() keys=(EPMD_PORT) failed=0
  t0=$(now_ms)
  [[ $count =~ ^[1-9]$ ]] || die "rabbitmq-cluster: give the number of nodes, 1 to 9"
  mkdir -p "$SCRATCH"
  for ((i = 1; i <= count; i++)); do keys+=("RABBITMQ${i}_PORT" "RABBITMQ${i}_DIST_PORT"); done
  load_ports
  # A node killed with -9 leaves its epmd behind, holding our epmd port.
  cluster_any_running || epmd_stop
  ensure_ports "${keys[@]}"
  [[ -f $CLUSTER_COOKIE ]] || (umask 077 && head -c 32 /dev/urandom | sha256sum | cut -c1-40 >"$CLUSTER_COOKIE")
  # One epmd before the nodes boot side by side, rather than one race per node to start it.
  (rabbit_env && epmd -daemon)
  for ((i = 1; i <= count; i++)); do
    (rabbit_select "$i" && mkdir -p "$RABBIT_DIR" && start_one "$RABBIT_LABEL" rabbit_start) & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  for ((i = 2; i <= count && !failed; i++)); do rabbit_join "$i" || failed=1; done
  report cluster "$( ((failed)) && echo FAILED || echo ready)" "$count nodes" "$t0"
  return "$failed"
}

rabbit_cluster_stop() {
  local i pid pids=()
  for i in $(cluster_nodes); do
    (rabbit_select "$i" && rabbit_stop) & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
}

# kill -9 of node $1 (fault tests); its epmd entry goes with it.
rabbit_cluster_kill() (
  local pid t0
  t0=$(now_ms)
  rabbit_select "${1:?give the node number}"
  load_ports
  rabbit_running || die "$RABBIT_LABEL is not running"
  pid=$(<"$RABBIT_DIR/rabbitmq.pid")
  kill -KILL "$pid"
  wait_gone "$pid" 10 || die "$RABBIT_LABEL (pid $pid) survived kill -9"
  report "$RABBIT_LABEL" killed "127.0.0.1:${PORT[${RABBIT_KEY}_PORT]}" "$t0"
)

# For services.env: every node of the cluster in order, killed ones too (they are still members).
cluster_env() {
  local i urls=() names=()
  for i in $(cluster_nodes); do
    rabbit_select "$i"
    urls+=("amqp://127.0.0.1:${PORT[${RABBIT_KEY}_PORT]}")
    names+=("$RABBIT_NODE")
  done
  ((${#urls[@]})) || return 0
  echo "export OUTBOXD_TEST_RABBITMQ_CLUSTER_URLS='${urls[*]}'"
  echo "export OUTBOXD_TEST_RABBITMQ_CLUSTER_NODES='${names[*]}'"
}
