#!/usr/bin/env bash
# Static checks of the scripts and the packaging: shellcheck, the systemd unit, the Dockerfile, the library layering, the Prometheus rules.
#
# Usage: tests/packaging/check.sh [path/to/outboxd]   (default: build/daemon/outboxd)
# The Dockerfile is checked by reading it: its packages exist in Debian 12, its runtime stage
# installs every library the binary links against, its bases are pinned and its HEALTHCHECK
# runs outboxd's own. tests/container/run.sh builds and runs the image itself.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
binary=${1:-build/daemon/outboxd}
passed=0
failed=0

check() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then
    passed=$((passed + 1))
    printf 'ok   %s\n' "$name"
  else
    failed=$((failed + 1))
    printf 'FAIL %s\n%s\n' "$name" "$out"
  fi
}

shellcheck_scripts() {
  shellcheck scripts/*.sh .ci/run tests/packaging/*.sh tests/container/*.sh tests/fuzz/run.sh examples/*/run.sh
}

# systemd-analyze needs the ExecStart binary to exist, so a copy of the unit points at the
# build (or at a stub); any finding it prints is a failure, as are exposure scores over 2.0.
systemd_unit() {
  local dir exe out
  command -v systemd-analyze >/dev/null || { echo "systemd-analyze missing (Debian: systemd)"; return 1; }
  dir=$(mktemp -d)
  exe=$(readlink -f "$binary" 2>/dev/null || true)
  if [[ ! -x $exe ]]; then
    exe=$dir/outboxd
    printf '#!/bin/sh\n' >"$exe"
    chmod +x "$exe"
  fi
  sed "s|^ExecStart=/usr/bin/outboxd|ExecStart=$exe|" systemd/outboxd.service >"$dir/outboxd.service"
  out=$(systemd-analyze verify --man=no "$dir/outboxd.service" 2>&1) || { echo "$out"; rm -rf "$dir"; return 1; }
  [[ -z $out ]] || { echo "$out"; rm -rf "$dir"; return 1; }
  out=$(systemd-analyze security --offline=yes --threshold=20 "$dir/outboxd.service" 2>&1) ||
    { echo "$out" | grep -v '^✓'; rm -rf "$dir"; return 1; }
  rm -rf "$dir"
}

# A time span of the unit in whole seconds: "90", "90s" or "2min".
unit_seconds() {
  local value
  value=$(sed -n "s/^$1=//p" systemd/outboxd.service)
  case $value in
    *min) [[ ${value%min} =~ ^[0-9]+$ ]] && echo $((${value%min} * 60)) ;;
    *s) [[ ${value%s} =~ ^[0-9]+$ ]] && echo "${value%s}" ;;
    *) [[ $value =~ ^[0-9]+$ ]] && echo "$value" ;;
  esac
}

# The default of a key as config/outboxd.yaml documents it (an uncommented "  key: N" line).
documented_default() {
  local values
  values=$(sed -n "s/^  $1: \([0-9][0-9]*\)\$/\1/p" config/outboxd.yaml)
  [[ $values =~ ^[0-9]+$ ]] && echo "$values"
}

# The unit against what the daemon does with the documented defaults: a configuration error
# (exit 78) is not restarted; a statement waiting on a lock, statement_timeout_ms plus
# connect_timeout_ms (whole seconds, as libpq applies it), stays within 40% of WatchdogSec, the
# rule `outboxd run` enforces; TimeoutStopSec leaves shutdown_timeout_ms 10 s for the rest.
systemd_unit_agrees() {
  local watchdog stop statement connect shutdown bad=0
  grep -qx 'Restart=on-failure' systemd/outboxd.service || { echo "Restart=on-failure missing"; bad=1; }
  grep -qE '^RestartPreventExitStatus=(.* )?78( .*)?$' systemd/outboxd.service ||
    { echo "RestartPreventExitStatus=78 missing: a configuration error would be restarted forever"; bad=1; }
  grep -q 'kExitConfig = 78;' daemon/commands.hpp || { echo "daemon/commands.hpp: kExitConfig is not 78"; bad=1; }
  watchdog=$(unit_seconds WatchdogSec) || { echo "cannot read WatchdogSec"; return 1; }
  stop=$(unit_seconds TimeoutStopSec) || { echo "cannot read TimeoutStopSec"; return 1; }
  statement=$(documented_default statement_timeout_ms) || { echo "no default statement_timeout_ms"; return 1; }
  connect=$(documented_default connect_timeout_ms) || { echo "no default connect_timeout_ms"; return 1; }
  shutdown=$(documented_default shutdown_timeout_ms) || { echo "no default shutdown_timeout_ms"; return 1; }
  if ((statement == 0 || (statement + (connect + 999) / 1000 * 1000) * 5 > watchdog * 1000 * 2)); then
    echo "WatchdogSec=$watchdog is too short for statement_timeout_ms $statement + connect_timeout_ms $connect"
    bad=1
  fi
  if ((stop * 1000 < shutdown + 10000)); then
    echo "TimeoutStopSec=$stop leaves shutdown_timeout_ms $shutdown less than 10 s to hand back leases and close"
    bad=1
  fi
  return "$bad"
}

# Package names that the apt-get install of the Dockerfile stage number $1 (1, 2, ...) installs.
docker_packages() {
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' Dockerfile | awk -v stage="$1" '
    /^FROM / { n++ }
    n == stage && /apt-get install/ {
      on = 0
      for (i = 1; i <= NF; i++) {
        if ($i == "install") { on = 1; continue }
        if ($i == "&&") on = 0
        if (on && $i !~ /^-/) print $i
      }
    }'
}

docker_packages_exist() {
  local pkg bad=0
  for pkg in $(docker_packages 1) $(docker_packages 2); do
    apt-cache show "$pkg" >/dev/null 2>&1 || { echo "not a Debian package: $pkg"; bad=1; }
  done
  return "$bad"
}

# Every library the binary needs directly comes from a package the runtime stage installs
# (or from the base image; the sanitizer runtimes only exist in Debug builds).
docker_runtime_libs() {
  local lib path pkg runtime bad=0
  [[ -x $binary ]] || { echo "no $binary: build first"; return 1; }
  runtime=" $(docker_packages 2 | tr '\n' ' ') libc6 libgcc-s1 libstdc++6 "
  for lib in $(readelf -d "$binary" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    [[ $lib == libasan.so* || $lib == libubsan.so* ]] && continue
    path=$(readlink -f "$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')")
    # By the multiarch directory too: lib32 and i386 packages ship files of the same name, and with a
    # merged /usr dpkg knows some files under /lib only.
    pkg=$(dpkg -S "*/$(basename "$(dirname "$path")")/$(basename "$path")" 2>/dev/null | head -n1 | cut -d: -f1)
    [[ -n $pkg ]] || { echo "$lib: no package found"; bad=1; continue; }
    [[ $runtime == *" $pkg "* ]] || { echo "$lib comes from $pkg, which the runtime stage does not install"; bad=1; }
  done
  return "$bad"
}

docker_copy_sources() {
  local src bad=0
  while read -r src; do
    [[ $src == . || -e $src ]] || { echo "COPY source missing: $src"; bad=1; }
  done < <(awk '/^COPY / && !/--from=/ { for (i = 2; i < NF; i++) print $i }' Dockerfile)
  return "$bad"
}

# Every FROM names an exact base: a dated tag (debian:bookworm-20250520[-slim]) or a digest,
# never a moving one such as debian:12, bookworm-slim or latest; earlier stages may be named.
docker_from_pinned() {
  local image stages=" " bad=0
  while read -r image alias; do
    if [[ $stages == *" $image "* ]]; then
      :
    elif [[ ! $image =~ @sha256:[0-9a-f]{64}$ && ! $image =~ ^[a-z0-9./-]+:[a-z]+-[0-9]{8}(-slim)?$ ]]; then
      echo "FROM $image: not an exact tag (like debian:bookworm-20250520) or digest"; bad=1
    fi
    [[ -z $alias ]] || stages+="$alias "
  done < <(awk 'toupper($1) == "FROM" { print $2, (toupper($3) == "AS" ? $4 : "") }' Dockerfile)
  return "$bad"
}

# The last stage has one HEALTHCHECK: outboxd's own subcommand (no curl in the image), reading
# the config that the default command runs with; and the binary has that subcommand.
docker_healthcheck() {
  local last health run_config
  last=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' Dockerfile | awk '/^FROM /{ s = "" } { s = s $0 "\n" } END { printf "%s", s }')
  health=$(grep '^HEALTHCHECK ' <<<"$last" || true)
  [[ $(grep -c . <<<"$health") == 1 ]] || { echo "the runtime stage needs exactly one HEALTHCHECK"; return 1; }
  [[ $health == *'CMD ["/usr/local/bin/outboxd", "healthcheck", "-c", '* ]] ||
    { echo "HEALTHCHECK must run [\"/usr/local/bin/outboxd\", \"healthcheck\", \"-c\", ...]: $health"; return 1; }
  run_config=$(sed -n 's/^CMD \["run", "-c", \("[^"]*"\)\]$/\1/p' <<<"$last")
  [[ -n $run_config && $health == *"\"healthcheck\", \"-c\", $run_config]"* ]] ||
    { echo "HEALTHCHECK reads another config than CMD [\"run\", \"-c\", $run_config]: $health"; return 1; }
  [[ -x $binary ]] || { echo "no $binary: build first"; return 1; }
  "$binary" healthcheck --help >/dev/null || { echo "$binary has no healthcheck subcommand"; return 1; }
}

# docs/design.md's link graph, which one include path for all of lib/ does not enforce: core and
# dispatch include only each other and the standard library (no I/O headers), pg and amqp never
# include each other.
library_layering() {
  local bad=0 found
  found=$(grep -rHn '#include' lib/core lib/dispatch |
    grep -vE '#include ("(core|dispatch)/[a-z_]+\.hpp"|<[a-z_]+>)' || true)
  found+=$(grep -rHnE '#include <(iostream|fstream|cstdio|filesystem|thread)>' lib/core lib/dispatch || true)
  [ -z "$found" ] || { echo "core/dispatch include more than themselves and pure std headers:"; echo "$found"; bad=1; }
  found=$(grep -rHn '#include "amqp/' lib/pg || true)$(grep -rHn '#include "pg/' lib/amqp || true)
  [ -z "$found" ] || { echo "pg and amqp include each other:"; echo "$found"; bad=1; }
  # One program per folder of daemon/: none includes another's headers; tenants/ is built on
  # run/'s loop and includes it, and nothing includes tenants/.
  local program
  for program in run console operator; do
    found=$(grep -rHnE '#include "daemon/(run|console|operator|tenants)/' "daemon/$program" | grep -v "\"daemon/$program/" || true)
    [ -z "$found" ] || { echo "daemon/$program includes another program's headers:"; echo "$found"; bad=1; }
  done
  found=$(grep -rHnE '#include "daemon/(console|operator)/' daemon/tenants || true)
  [ -z "$found" ] || { echo "daemon/tenants includes another program's headers:"; echo "$found"; bad=1; }
  return $bad
}

# What target_link_libraries(outboxd_LIB ...) in lib/LIB/CMakeLists.txt names, one a line.
cmake_links() {
  tr '\n' ' ' <"lib/$1/CMakeLists.txt" | grep -oE "target_link_libraries\(outboxd_$1 [^)]*\)" |
    sed -E "s/^target_link_libraries\(outboxd_$1 //; s/\)$//" | tr -s ' ' '\n' |
    grep -vxE 'PUBLIC|PRIVATE|INTERFACE|' | sort -u || true
}

# The libraries of ours after "->" on LIB's line of docs/design.md's graph (third-party ones are in [] or
# not ours), one a line.
doc_links() {
  awk -v lib="$1" '$1 == lib && /->/ { sub(/.*-> */, ""); sub(/ *[[(].*/, ""); print }' docs/design.md |
    tr ',' '\n' | sed 's/^ *//; s/ *$//' | grep -xE 'core|dispatch|config|log|pg|amqp|metrics|http|console' | sort -u || true
}

# The same rules on the link lines: core links nothing, dispatch only core (no third-party library,
# not even through a find_package of its own), pg and amqp never each other; and every library's
# links to ours are the ones the design's graph draws.
library_links() {
  local bad=0 lib ours
  [ -z "$(cmake_links core)" ] || { echo "lib/core links: $(cmake_links core | tr '\n' ' ')"; bad=1; }
  [ "$(cmake_links dispatch)" = outboxd_core ] ||
    { echo "lib/dispatch links more than outboxd_core: $(cmake_links dispatch | tr '\n' ' ')"; bad=1; }
  if grep -HnE 'find_package|find_library|target_include_directories\(outboxd_dispatch' \
    lib/core/CMakeLists.txt lib/dispatch/CMakeLists.txt; then
    echo "core/dispatch look for third-party libraries"; bad=1
  fi
  cmake_links pg | grep -qx outboxd_amqp && { echo "pg links amqp"; bad=1; }
  cmake_links amqp | grep -qx outboxd_pg && { echo "amqp links pg"; bad=1; }
  for lib in core dispatch config log pg amqp metrics http console; do
    ours=$(cmake_links "$lib" | sed -n 's/^outboxd_//p')
    [ "$ours" = "$(doc_links "$lib")" ] ||
      { echo "lib/$lib links [$(echo "$ours" | tr '\n' ' ')] but docs/design.md draws [$(doc_links "$lib" | tr '\n' ' ')]"; bad=1; }
  done
  return $bad
}

check "shellcheck scripts/*.sh .ci/run tests/packaging/*.sh tests/container/*.sh tests/fuzz/run.sh examples/*/run.sh" shellcheck_scripts
check "systemd unit verifies, exposure <= 2.0" systemd_unit
check "systemd unit agrees with the daemon (exit 78, watchdog, stop timeout)" systemd_unit_agrees
check "Dockerfile packages exist in Debian 12" docker_packages_exist
check "Dockerfile runtime stage has every linked library" docker_runtime_libs
check "Dockerfile COPY sources exist" docker_copy_sources
check "Dockerfile FROM lines name exact tags or digests" docker_from_pinned
check "Dockerfile HEALTHCHECK runs outboxd healthcheck with the run config" docker_healthcheck
check "core and dispatch are pure, pg and amqp apart, programs apart (docs/design.md)" library_layering
check "config/prometheus loads in promtool and its alert rules pass their unit tests" tests/packaging/prometheus_rules.sh
check "core and dispatch link nothing third-party; the link graph is the design's" library_links
printf '%d passed, %d failed\n' "$passed" "$failed"
((failed == 0))
