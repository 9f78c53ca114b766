#!/usr/bin/env bash
# Prints the --ulimit flags that podman build and podman run need here, one per line.
#
# podman's default rlimits (nofile 1048576) exceed the hard limits of many machines, and every
# RUN step or container then fails in setrlimit. The hard limits themselves do, except NPROC:
# podman caps its own at kernel.pid_max (32768 here) and may not raise a child's past that.
set -euo pipefail
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
pid_max=$(cat /proc/sys/kernel/pid_max)
if [[ $nproc == unlimited ]] || ((nproc > pid_max)); then nproc=$pid_max; fi
[[ $nofile == unlimited ]] || printf -- '--ulimit=nofile=%s:%s\n' "$nofile" "$nofile"
printf -- '--ulimit=nproc=%s:%s\n' "$nproc" "$nproc"
