# docketd in a container.
#
#   docker build -t docketd .
#   docker run -d --name docketd -p 8080:8080 -v docket-data:/var/lib/docket \
#       -e DOCKET_ADMIN_USER=admin -e DOCKET_ADMIN_PASSWORD='choose one' docketd
#
# Data lives on the volume at /var/lib/docket (or in PostgreSQL with -e DOCKET_DATABASE_URL=postgres://…). Logs are
# JSON lines on standard error; metrics are on port 9464 when -e DOCKET_METRICS_PORT=9464 (and -e
# DOCKET_METRICS_HOST=0.0.0.0 to reach them from outside the container). See docs/deployment.md.

# Build: the Swift toolchain, docketd linked with Swift's standard library, and the web UI's resource bundle.
FROM swift:6.3-bookworm AS build
WORKDIR /src
# The manifest first, so that fetching the dependencies is reused while only Docket's own code changes.
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product docketd --static-swift-stdlib \
    && mkdir -p /out \
    && cp "$(swift build -c release --show-bin-path)/docketd" /out/ \
    && cp -R "$(swift build -c release --show-bin-path)/Docket_DocketServer.resources" /out/

# Run: a slim Debian with what the binary links (libstdc++, zlib), certificates for outgoing HTTPS (push,
# OpenID providers), time zones for users' local times, and curl for the health check.
FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates tzdata libstdc++6 zlib1g curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 docket \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/docket --shell /usr/sbin/nologin docket \
    && mkdir -p /var/lib/docket \
    && chown docket:docket /var/lib/docket
COPY --from=build /out/ /opt/docket/
ENV DOCKET_HOST=0.0.0.0 \
    DOCKET_PORT=8080 \
    DOCKET_DATA_DIR=/var/lib/docket \
    DOCKET_LOG_FORMAT=json
USER 10001:10001
WORKDIR /var/lib/docket
VOLUME ["/var/lib/docket"]
EXPOSE 8080 9464
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8080/health/live"]
ENTRYPOINT ["/opt/docket/docketd"]
CMD ["serve"]
