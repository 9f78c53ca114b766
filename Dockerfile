# outboxd container image: a Debian 12 stage builds the Release binary (no tests), a slim
# Debian 12 stage runs it as a non-root user (uid 10001) with the runtime libraries only.
#
#   docker build -t outboxd .
#   docker run --rm -v "$PWD/outboxd.yaml:/etc/outboxd/outboxd.yaml:ro" outboxd
#   docker run --rm -v "$PWD/outboxd.yaml:/etc/outboxd/outboxd.yaml:ro" outboxd migrate -c /etc/outboxd/outboxd.yaml
#
# Base images: exact, dated tags of Docker Hub's official Debian image (debian:bookworm-20250520
# and its -slim variant are published there; dated tags are not moved by later releases). To
# pin by content too, append the digest your registry reports: FROM debian:...@sha256:....
# tests/container/build.sh builds this file without a registry: it debootstraps bookworm and
# imports it under both names.
#
# HEALTHCHECK runs `outboxd healthcheck`, which GETs /healthz at the config's http.listen:
# set http.listen (e.g. 0.0.0.0:9187) or the container reports unhealthy. Podman keeps a
# HEALTHCHECK only in Docker-format images (podman build --format docker).
# Secrets: mount them as files and point the YAML's *_file keys at them (or use ${ENV}).
# The migrations are embedded in the binary; sql/ is copied to /usr/share/outboxd/sql for
# teams that apply them with psql or their own tool.
# tests/packaging/check.sh keeps the runtime package list in step with what the binary links;
# tests/container/run.sh builds the image and runs it against PostgreSQL and RabbitMQ.

FROM debian:bookworm-20250520 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      g++ cmake ninja-build pkg-config \
      libpq-dev libssl-dev libqpid-proton-cpp12-dev libspdlog-dev libcli11-dev libyaml-cpp-dev \
      nlohmann-json3-dev libcpp-httplib-dev libsystemd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DOUTBOXD_TESTS=OFF -DOUTBOXD_SANITIZE=OFF \
 && cmake --build /build --target outboxd \
 && install -D -m 0755 -s /build/daemon/outboxd /out/usr/local/bin/outboxd \
 && /out/usr/local/bin/outboxd --help >/dev/null

FROM debian:bookworm-20250520-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libpq5 libssl3 libqpid-proton-cpp12 libqpid-proton11 libyaml-cpp0.7 libspdlog1.10 libfmt9 \
      libcpp-httplib0.11 libsystemd0 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 outboxd \
 && useradd --system --uid 10001 --gid outboxd --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin outboxd
COPY --from=build /out/ /
COPY sql/ /usr/share/outboxd/sql/
COPY config/outboxd.yaml /usr/share/outboxd/outboxd.yaml.example
# Numeric, so that orchestrators can tell the user is not root without resolving names.
USER 10001:10001
# The probe gives up after 3 s by itself and says why; the timeout only catches a hung probe.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/outboxd", "healthcheck", "-c", "/etc/outboxd/outboxd.yaml"]
ENTRYPOINT ["/usr/local/bin/outboxd"]
CMD ["run", "-c", "/etc/outboxd/outboxd.yaml"]
