#!/usr/bin/env bash
# The Prometheus files of config/prometheus: the sample config and its rules load, and the rules' unit tests pass.
#
# Usage: tests/packaging/prometheus_rules.sh   (exit 77 when promtool is missing: Debian package prometheus)
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../../config/prometheus"
command -v promtool >/dev/null || { echo "promtool missing (Debian: prometheus)"; exit 77; }
promtool check config prometheus.yml
promtool check rules outboxd.rules.yml
promtool test rules outboxd.rules.test.yml
