# syntax=docker/dockerfile:1
# coordd: a static binary on a distroless base, running as a non-root user.
#   docker build -t coordd .
#   docker run -p 7070:7070 -p 7071:7071 coordd
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api ./api
COPY cmd ./cmd
COPY internal ./internal
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/coordd ./cmd/coordd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coordd /usr/local/bin/coordd
USER nonroot:nonroot
EXPOSE 7070 7071
# Inside a container the daemon must listen beyond loopback; put it behind a
# network policy (a sidecar is reached over the pod's localhost anyway).
ENTRYPOINT ["/usr/local/bin/coordd", "--grpc-addr=0.0.0.0:7070", "--http-addr=0.0.0.0:7071"]
