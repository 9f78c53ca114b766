#!/usr/bin/env bash
# Builds the outboxd image from the Dockerfile with podman and no registry: a debootstrapped
# Debian 12 is imported under the names the Dockerfile's FROM lines pin, then built upon.
#
# Usage: tests/container/build.sh [image]        (default: localhost/outboxd:test)
# The base is debootstrapped once (about 35 s) into ${OUTBOXD_CACHE:-~/.cache/outboxd}/container;
# delete bookworm-minbase.tar there to take newer Debian packages. OUTBOXD_DEBIAN_MIRROR
# picks the mirror (default: the first URIs of /etc/apt/sources.list.d/debian.sources).
# Needs root, podman, buildah's storage and debootstrap (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
image=${1:-localhost/outboxd:test}
cache=$(realpath -m "${OUTBOXD_CACHE:-${HOME:-/root}/.cache/outboxd}/container")
tarball=$cache/bookworm-minbase.tar

say() { printf 'container: %s\n' "$*"; }

default_mirror() {
  local uri
  uri=$(awk '$1 == "URIs:" { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

# A minbase bookworm, as Docker Hub's debian images are, with the apt sources those images
# carry (the release, its updates and security), packed as a tar for `podman import`.
make_base_tarball() {
  local root=$cache/rootfs.tmp mirror=${OUTBOXD_DEBIAN_MIRROR:-$(default_mirror)}
  rm -rf "$root" "$tarball.tmp"
  mkdir -p "$cache"
  say "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  rm -f "$root/etc/apt/sources.list" "$root"/var/cache/apt/archives/*.deb
  mkdir -p "$root/etc/apt/sources.list.d"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$root"
}

# Every FROM image of the Dockerfile, imported from the tarball unless podman already holds
# that very tarball under the name (the label tells). Short names resolve to docker.io/library
# as in Docker; only Debian bookworm images can stand in.
import_bases() {
  local name full stamp
  stamp=$(stat -c '%s-%Y' "$tarball")
  while read -r name; do
    [[ $name == debian:bookworm-* ]] ||
      { echo "container: FROM $name: only debian:bookworm-* can be made here" >&2; exit 1; }
    full=docker.io/library/$name
    if [[ $(podman image inspect --format '{{index .Labels "org.outboxd.base"}}' "$full" 2>/dev/null) == "$stamp" ]]; then
      continue
    fi
    say "podman import $tarball as $full"
    podman import --quiet --change "LABEL org.outboxd.base=$stamp" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' "$tarball" "$full" >/dev/null
  done < <(awk '$1 == "FROM" { print $2 }' Dockerfile | sort -u)
}

start=$SECONDS
[[ -f $tarball ]] || make_base_tarball
import_bases
base_done=$SECONDS
say "base ready in $((base_done - start)) s; podman build -t $image"
# --format docker: an OCI image would drop the HEALTHCHECK. --isolation chroot: RUN steps
# need no OCI runtime. The default runtime, crun, fails every RUN on cgroup v1 hybrid hosts
# ("cgroups in hybrid mode not supported"); --runtime runc with these limits works too.
mapfile -t limits < <(tests/container/podman_limits.sh)
log=$cache/build.log
podman build --format docker --pull=never --isolation chroot "${limits[@]}" -t "$image" . >"$log" 2>&1 ||
  { tail -n 80 "$log" >&2; echo "container: podman build failed; full log: $log" >&2; exit 1; }
say "image $image built in $((SECONDS - base_done)) s"
