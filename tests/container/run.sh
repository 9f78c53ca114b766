#!/usr/bin/env bash
# The container test: builds the image from the Dockerfile (tests/container/build.sh), then runs
# it with podman against the services of scripts/services.sh (tests/container/test_container.py).
#
# Usage: tests/container/run.sh       (with the env of scripts/services.sh sourced)
# ctest runs it as container.image (label container). Without root or podman it exits 77,
# which ctest reports as skipped, unless OUTBOXD_REQUIRE_SERVICES=1 makes that a failure.
# OUTBOXD_IMAGE names the image to build and test (default: localhost/outboxd:test).
#
# How the image is run here (no systemd, cgroup v1 hybrid), in test_container.py's run_flags:
# `podman run --runtime runc --network=host --health-interval=disable $(podman_limits.sh)`.
# crun refuses cgroup v1 hybrid hosts; podman's default rlimits exceed the hard ones ("error
# setting rlimit type 7"); without systemd podman cannot schedule the HEALTHCHECK (it logs
# "unable to get systemd connection"), so the test runs it with `podman healthcheck run`.
# Timing on 2 busy cores: debootstrap 31 s (cached after), image build 224 s cold, 119 s
# after a source change (apt layers cached), 1 s when lib/, daemon/, sql/... are unchanged
# (tests/ and docs/ are not in the build context), tests 2-6 s. Each changed source tree
# leaves its build-stage layers (about 750 MB) as cache: `podman image prune` reclaims them.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
export OUTBOXD_IMAGE=${OUTBOXD_IMAGE:-localhost/outboxd:test}

missing=""
[[ $(id -u) == 0 ]] || missing=" root"
for tool in podman runc debootstrap; do command -v "$tool" >/dev/null || missing+=" $tool"; done
if [[ -n $missing ]]; then
  echo "container: cannot run, missing:$missing (run as root; scripts/setup.sh installs the tools)" >&2
  [[ ${OUTBOXD_REQUIRE_SERVICES:-} == 1 ]] && exit 1
  exit 77
fi

start=$SECONDS
tests/container/build.sh "$OUTBOXD_IMAGE"
built=$SECONDS
status=0
/usr/bin/python3 -m pytest -q -p no:cacheprovider -rsP tests/container/test_container.py || status=$?
echo "container: image build $((built - start)) s, container tests $((SECONDS - built)) s"
exit "$status"
