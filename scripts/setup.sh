#!/usr/bin/env bash
# Installs the Debian 12 packages that building, testing and the demo need, then builds outboxd.
#
# Usage: scripts/setup.sh [--release | --demo] [--target T]... [--no-build]
#   (default)    every package the tests use; Debug build with sanitizers and the tests in build/
#   --release    every package too; a Release build without tests or sanitizers in build-release/
#   --demo       only the packages scripts/demo.sh uses (DEMO_PACKAGES: the daemon's build,
#                PostgreSQL, RabbitMQ, the demo consumer); the Release build of --release
#   --target T   build only target T (repeatable; e.g. outboxd); default: every target
#   --no-build   install packages only
# Safe to run again: only missing packages are installed, and builds are incremental
# (through ccache).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

# What scripts/demo.sh runs: a Release outboxd, PostgreSQL and RabbitMQ from scripts/services.sh,
# scripts/demo_consumer.py (Qpid Proton's Python binding) and curl for /metrics.
DEMO_PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache
  libpq-dev libssl-dev libqpid-proton-cpp12-dev libspdlog-dev libcli11-dev libyaml-cpp-dev
  nlohmann-json3-dev libcpp-httplib-dev libsystemd-dev
  postgresql rabbitmq-server python3-qpid-proton
  # scripts/services.sh: ss, beyond Debian's essential set.
  iproute2 curl
)
# The rest of what the tests use (with a JDK, Node and Go: see install_missing).
TEST_PACKAGES=(
  catch2
  postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl pgbouncer
  python3-pytest python3-psycopg2
  shellcheck valgrind systemd
  # scripts/statements.sh formats docs/statements.sql with pg_format.
  pgformatter
  # A German locale for the PostgreSQL test cluster whose server messages are not English
  # (see ensure_locale).
  locales
  # The JMS test's consumer (tests/clients/jms) is built with Maven from Maven Central.
  maven
  # scripts/services.sh downloads Artemis over https.
  ca-certificates
  # The container test (tests/container) builds and runs the image with these.
  podman buildah runc uidmap debootstrap
  # The CloudEvents consumer example's test (tests/examples) installs the SDK into a venv.
  python3-venv
  # The fuzz targets (tests/fuzz/run.sh) are built with clang's libFuzzer.
  clang-15 libfuzzer-15-dev
  # promtool checks config/prometheus and /metrics; the metrics test runs a Prometheus server.
  prometheus
  # The console's browser test drives headless Chromium over the DevTools protocol (a websocket).
  chromium python3-websocket
)

usage() { echo "usage: scripts/setup.sh [--release | --demo] [--target T]... [--no-build]" >&2; exit 2; }
release=0
demo=0
build=1
targets=()
while (($#)); do
  case $1 in
    --release) release=1 ;;
    --demo) release=1 demo=1 ;;
    --target) (($# > 1)) || usage; targets+=("$2"); shift ;;
    --no-build) build=0 ;;
    *) usage ;;
  esac
  shift
done

# Toxiproxy, the fault proxy of the network fault test (tests/fault/test_network_faults.py), is
# built from its Go module into .scratch/tools/ (kept between runs); scripts/services.sh exports
# its path as OUTBOXD_TEST_TOXIPROXY. Its go.mod asks for Go 1.23. A Go of 1.21 or later fetches
# that toolchain from the Go module proxy by itself; Debian 12's golang-go (1.19) cannot build it
# nor switch, so it only downloads the toolchain module (golang.org/toolchain) that newer Go
# switches to, and that toolchain builds Toxiproxy.
TOXIPROXY_VERSION=v2.12.0
GO_TOOLCHAIN=go1.23.12
TOOLS=$PWD/.scratch/tools

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# Artemis needs Java 17 or later, and the JMS test compiles with it: any such JDK on PATH will do.
java_ok() {
  command -v java >/dev/null && command -v javac >/dev/null &&
    java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'
}

install_missing() {
  local missing=() pkg policy=/usr/sbin/policy-rc.d packages=("${DEMO_PACKAGES[@]}")
  ((demo)) || packages+=("${TEST_PACKAGES[@]}")
  for pkg in "${packages[@]}"; do installed "$pkg" || missing+=("$pkg"); done
  if ((!demo)); then
    java_ok || installed openjdk-17-jdk-headless || missing+=(openjdk-17-jdk-headless)
    # The Node order saga example (its test runs npm ci): any node 18+ with npm on PATH will do.
    command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
  fi
  ((release)) || go_bin >/dev/null || [[ -x $TOOLS/toxiproxy-server ]] || missing+=(golang-go)
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

# The connection-failure test runs a cluster with lc_messages=de_DE.UTF-8: outboxd must tell
# bad credentials from a server that is down without reading English.
ensure_locale() {
  locale -a 2>/dev/null | grep -Eqix 'de_DE\.utf-?8' && return 0
  [[ $(id -u) == 0 ]] || { echo "setup.sh: locale de_DE.UTF-8 missing, run as root" >&2; exit 1; }
  sed -i 's/^# *de_DE.UTF-8/de_DE.UTF-8/' /etc/locale.gen
  locale-gen >/dev/null
}

# The go command on PATH (or Go's default install dir); fails when there is none.
go_bin() {
  local go
  go=$(command -v go || echo /usr/local/go/bin/go)
  [[ -x $go ]] && echo "$go"
}

# A subshell: the Go environment stays in it.
build_toxiproxy() (
  [[ -x $TOOLS/toxiproxy-server ]] && exit 0
  local go t0=$SECONDS
  export GOPATH=$TOOLS/go GOCACHE=$TOOLS/go/cache GOFLAGS=-modcacherw
  mkdir -p "$TOOLS"
  cd "$TOOLS"  # outside any module
  go=$(go_bin)
  if ! "$go" version | grep -Eq ' go1\.(2[1-9]|[3-9][0-9])'; then
    local dir
    dir=$("$go" mod download -json "golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-$(dpkg --print-architecture)" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/*  # module zips keep no modes
    go=$dir/bin/go
    export GOTOOLCHAIN=local
  fi
  echo "setup.sh: building toxiproxy $TOXIPROXY_VERSION with $("$go" version | cut -d' ' -f3)"
  GOBIN=$TOOLS/bin.tmp "$go" install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mv "$TOOLS/bin.tmp/server" "$TOOLS/toxiproxy-server"
  rmdir "$TOOLS/bin.tmp"
  echo "setup.sh: toxiproxy built in $((SECONDS - t0)) s"
)

# Configure (again, so the options hold for a dir configured before), then build.
build_tree() {
  local dir=$1 type=$2 log only=()
  shift 2
  ((${#targets[@]} == 0)) || only=(--target "${targets[@]}")
  log=$(mktemp)
  if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_BUILD_TYPE="$type" "$@" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  rm -f "$log"
  echo "setup.sh: building ${targets[*]:-everything} ($type) in $dir/"
  cmake --build "$dir" "${only[@]}" -- --quiet | { grep -v '^ninja: no work to do\.$' || true; }
}

install_missing
((demo)) || java_ok || { echo "setup.sh: a JDK 17 or later is needed for Artemis and the JMS test" >&2; exit 1; }
# What only the tests use; a Release build (the demo, the benchmarks) has no tests.
if ((!release)); then
  ensure_locale
  build_toxiproxy
fi
((build)) || exit 0
# Warnings are errors in the project's own builds (CMakeLists.txt: OUTBOXD_WERROR).
if ((release)); then
  build_tree build-release Release -DOUTBOXD_TESTS=OFF -DOUTBOXD_SANITIZE=OFF -DOUTBOXD_WERROR=ON
else
  build_tree build Debug -DOUTBOXD_WERROR=ON
fi
