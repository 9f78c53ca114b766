#!/usr/bin/env bash
# Static checks of the scripts and the packaging: shellcheck, the systemd unit, the Dockerfile.
#
# Usage: tests/packaging/check.sh [path/to/outboxd]   (default: build/daemon/outboxd)
# Docker cannot run here, so the Dockerfile is checked by reading it: its packages exist in
# Debian 12 and its runtime stage installs every library the binary links against.
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
  shellcheck scripts/*.sh .ci/run tests/packaging/*.sh examples/*/run.sh
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
    pkg=$(dpkg -S "*/$(basename "$path")" 2>/dev/null | head -n1 | cut -d: -f1)
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

check "shellcheck scripts/*.sh .ci/run tests/packaging/*.sh examples/*/run.sh" shellcheck_scripts
check "systemd unit verifies, exposure <= 2.0" systemd_unit
check "Dockerfile packages exist in Debian 12" docker_packages_exist
check "Dockerfile runtime stage has every linked library" docker_runtime_libs
check "Dockerfile COPY sources exist" docker_copy_sources
printf '%d passed, %d failed\n' "$passed" "$failed"
((failed == 0))
