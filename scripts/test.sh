#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: packages, build, static checks of the
# packaging, the Release build of every target with GCC and clang (scripts/release_builds.sh),
# throwaway services, then every ctest label (unit, integration, fault, fuzz: the
# libFuzzer targets of tests/fuzz, container: the image built from the Dockerfile with podman
# and run against the services).
#
# Usage: scripts/test.sh [ctest args...]     e.g. scripts/test.sh -L unit
# Services run in a scratch dir of their own, stopped and removed on exit (kept, with their
# logs, when a test failed); set OUTBOXD_SCRATCH to use and keep a dir of your choice.
# Exit status: ctest's, or non-zero when a step before it failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
root=$PWD

step() { printf '== %s\n' "$*"; }

step setup
scripts/setup.sh

step "static checks"
tests/packaging/check.sh

# The whole suite only: a run of some labels (scripts/test.sh -L unit) skips them.
if (($# == 0)); then
  step "release builds"
  scripts/release_builds.sh
fi

step services
keep_scratch=0
if [[ -n ${OUTBOXD_SCRATCH:-} ]]; then
  keep_scratch=1
else
  mkdir -p .scratch
  OUTBOXD_SCRATCH=$(mktemp -d "$root/.scratch/test.XXXXXX")
fi
export OUTBOXD_SCRATCH
status=1
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if ((keep_scratch)) || ((status != 0)); then
    "$root/scripts/services.sh" stop || true
    echo "services stopped; logs and data kept in $OUTBOXD_SCRATCH"
  else
    "$root/scripts/services.sh" clean || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
scripts/services.sh start
# shellcheck source=/dev/null
source "$OUTBOXD_SCRATCH/services.env"
/usr/bin/python3 tests/packaging/broker_smoke.py
# The services are there: a test that finds one missing fails instead of skipping.
export OUTBOXD_REQUIRE_SERVICES=1
# Tests that fetch npm packages run Node, which trusts only its own CA list unless told
# otherwise: have it trust the system's store too, as curl, Maven and Python here do.
export NODE_EXTRA_CA_CERTS=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}

step ctest
status=0
ctest --test-dir build --output-on-failure -j2 "$@" || status=$?
exit "$status"
