#!/usr/bin/env bash
# The Release build of every target (daemon, tools, tests) with each compiler Debian 12 ships,
# warnings as errors: what a packager's build meets, which the Debug build of scripts/setup.sh
# does not show (some warnings come only from -O3's inlining).
#
# Usage: scripts/release_builds.sh [COMPILER...]   default: g++-12 clang++-15
# Each compiler builds in build-check-<compiler>/ (incremental, through ccache). Packages come
# from scripts/setup.sh. Exits non-zero when a build fails, after trying every compiler.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

compilers=("$@")
((${#compilers[@]})) || compilers=(g++-12 clang++-15)
failed=()
for cxx in "${compilers[@]}"; do
  command -v "$cxx" >/dev/null || { echo "release_builds.sh: $cxx not found" >&2; failed+=("$cxx"); continue; }
  dir=build-check-$cxx
  log=$dir/build.log
  mkdir -p "$dir"
  t0=$SECONDS
  if cmake -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_BUILD_TYPE=Release -DOUTBOXD_SANITIZE=OFF -DOUTBOXD_WERROR=ON >"$log" 2>&1 &&
    cmake --build "$dir" -- --quiet >>"$log" 2>&1; then
    echo "release_builds.sh: $cxx: every target built in $((SECONDS - t0)) s"
  else
    grep -E -B2 -A12 'error|FAILED' "$log" | head -80 >&2 || tail -40 "$log" >&2
    echo "release_builds.sh: $cxx: the Release build failed (whole log: $log)" >&2
    failed+=("$cxx")
  fi
done
((${#failed[@]} == 0))
