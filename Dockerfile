# syntax=docker/dockerfile:1
# coordd and coordctl: static binaries on a distroless base, running as a
# non-root user (65532). No shell in the final image: the health check is
# coordd's own `coordd healthcheck`.
#   docker build -t coordd .
#   docker run -p 7070:7070 -p 7071:7071 coordd
#   docker run coordd --store=redis   (arguments are added to the entrypoint's)

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY api ./api
COPY client ./client
COPY cmd ./cmd
COPY internal ./internal
# Every command under cmd/ (coordd, coordctl), one binary each in /out/.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot AS final
COPY --from=build /out/ /usr/local/bin/
USER nonroot:nonroot
EXPOSE 7070 7071
# Exits 0 when http://127.0.0.1:7071/healthz answers 200 (503 while draining).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/coordd", "healthcheck"]
# Inside a container the daemon must listen beyond loopback; put it behind a
# network policy, TLS and API keys (a sidecar is reached over the pod's
# localhost: its manifests set grpc_addr to 127.0.0.1:7070 in the config and
# replace this entrypoint with a `command`, since flags override the file).
ENTRYPOINT ["/usr/local/bin/coordd", "--grpc-addr=0.0.0.0:7070", "--http-addr=0.0.0.0:7071"]
