#!/usr/bin/env bash
# Runs the order saga example in one command: builds outboxd, starts PostgreSQL and RabbitMQ, runs the saga, checks every order.
#
# Usage: examples/order-saga/run.sh python|node [driver.py options]
#   e.g. examples/order-saga/run.sh python --orders 1000 --outboxd-kills 3 --saga-kills 1
# Services run in .scratch/order-saga (the previous run's are removed first) and are
# stopped on exit; ORDER_SAGA_KEEP=1 leaves them running, with the database, for a look.
# Exit status 0 when every order ended in a correct final state.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
root=$PWD

language=${1:-}
[[ $language == python || $language == node ]] || { echo "usage: examples/order-saga/run.sh python|node [options]" >&2; exit 2; }
shift

scripts/setup.sh --release --target outboxd
if [[ $language == node ]]; then
  (cd examples/order-saga/node && npm ci --no-audit --no-fund)
fi

export OUTBOXD_SCRATCH=$root/.scratch/order-saga
scripts/services.sh clean >/dev/null
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ ${ORDER_SAGA_KEEP:-0} == 1 ]]; then
    echo "services left running: source $OUTBOXD_SCRATCH/services.env; stop with OUTBOXD_SCRATCH=$OUTBOXD_SCRATCH scripts/services.sh clean"
  else
    "$root/scripts/services.sh" stop >/dev/null
  fi
}
trap cleanup EXIT
OUTBOXD_SERVICES="pg rabbitmq" scripts/services.sh start
# shellcheck source=/dev/null
source "$OUTBOXD_SCRATCH/services.env"

/usr/bin/python3 examples/order-saga/driver.py --language "$language" --outboxd build-release/daemon/outboxd \
  --workdir "$OUTBOXD_SCRATCH/run" --keep "$@"
