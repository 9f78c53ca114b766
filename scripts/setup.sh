#!/usr/bin/env bash
# Installs the Debian 12 packages that building, testing and the demo need, then builds outboxd.
#
# Usage: scripts/setup.sh [--release] [--no-build]
#   (default)    Debug build with sanitizers in build/
#   --release    also a Release build in build-release/
#   --no-build   install packages only
# Safe to run again: only missing packages are installed, and builds are incremental.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config curl
  libpq-dev libqpid-proton-cpp12-dev libspdlog-dev libcli11-dev libyaml-cpp-dev
  nlohmann-json3-dev libcpp-httplib-dev libsystemd-dev catch2
  postgresql postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl
  rabbitmq-server python3-qpid-proton python3-pytest python3-psycopg2
  shellcheck valgrind systemd
  podman buildah runc uidmap debootstrap
)

release=0
build=1
for arg in "$@"; do
  case $arg in
    --release) release=1 ;;
    --no-build) build=0 ;;
    *) echo "usage: scripts/setup.sh [--release] [--no-build]" >&2; exit 2 ;;
  esac
done

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# Artemis needs Java 17 or later; any such java on PATH will do.
java_ok() {
  command -v java >/dev/null && java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'
}

install_missing() {
  local missing=() pkg policy=/usr/sbin/policy-rc.d
  for pkg in "${PACKAGES[@]}"; do installed "$pkg" || missing+=("$pkg"); done
  java_ok || installed openjdk-17-jre-headless || missing+=(openjdk-17-jre-headless)
  ((${#missing[@]})) || return 0
  [[ $(id -u) == 0 ]] || { echo "setup.sh: missing packages, run as root: ${missing[*]}" >&2; exit 1; }
  echo "setup.sh: installing ${missing[*]}"
  # The packaged PostgreSQL and RabbitMQ must not start system-wide services: ours run from
  # scratch dirs (scripts/services.sh). policy-rc.d tells the package scripts not to start any.
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [[ -n $(trap -p EXIT) ]]; then rm -f "$policy"; trap - EXIT; fi
}

# Configure once (ninja re-runs cmake by itself when a CMakeLists changes), then build.
build_tree() {
  local dir=$1 type=$2 log
  log=$(mktemp)
  if [[ ! -f $dir/build.ninja ]]; then
    if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" >"$log" 2>&1; then
      cat "$log" >&2; rm -f "$log"; exit 1
    fi
  fi
  rm -f "$log"
  echo "setup.sh: building $dir ($type)"
  cmake --build "$dir" -- --quiet
}

install_missing
java_ok || { echo "setup.sh: java 17 or later is needed for Artemis" >&2; exit 1; }
if ((build)); then
  build_tree build Debug
  ((release == 0)) || build_tree build-release Release
fi
