#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this): formatting, vet,
# staticcheck, buf lint, a check that the generated code matches the .proto
# files, and every Go test with the race detector, against a fresh standalone
# Redis and Redis Cluster from scripts/redis-cluster.sh (which installs
# Debian's redis-server when it is missing), stopped again on exit, and the
# Debian packages the Python package's tests need (scripts/debian-packages.sh).
#
# Usage: scripts/test.sh            everything
#        scripts/test.sh -short     skip the lint steps, run the tests only
set -euo pipefail
cd "$(dirname "$0")/.."

lint=1
[ "${1:-}" = "-short" ] && lint=0
step() { printf '\n== %s  (at %dm%02ds)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
tool() { go tool -modfile=tools/go.mod "$@"; }

gen=""
failover_summary=$(mktemp)
redis_started=0
cleanup() {
	if [ -n "$gen" ]; then rm -rf "$gen"; fi
	rm -f "$failover_summary"
	if [ "$redis_started" = 1 ]; then scripts/redis-cluster.sh stop || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$lint" = 1 ]; then
	step "gofmt"
	unformatted=$(gofmt -l $(git ls-files '*.go'))
	if [ -n "$unformatted" ]; then
		echo "gofmt would change:"; echo "$unformatted"; exit 1
	fi
	step "go vet"
	go vet ./...
	step "staticcheck"
	tool staticcheck ./...
	step "buf lint"
	tool buf lint
	step "generated code matches api/proto"
	gen=$(mktemp -d)
	tool buf generate -o "$gen"
	diff -r "$gen/api/gen" api/gen
	diff -r "$gen/api/openapi" api/openapi
fi

step "redis (scripts/redis-cluster.sh: a fresh standalone server and cluster)"
scripts/redis-cluster.sh stop
redis_started=1
# Assigned first and evaluated after, so that a failed start stops the
# script (eval "$(...)" would hide the exit status).
redis_env=$(scripts/redis-cluster.sh start)
eval "$redis_env"
echo "$redis_env"

step "Debian packages the tests need (scripts/debian-packages.sh: the Python package's grpcio, protobuf, setuptools, wheel, venv, and protoc for its stubs; curl for the README's curl tour)"
scripts/debian-packages.sh python3-grpcio python3-protobuf python3-setuptools python3-wheel python3-venv \
	protobuf-compiler protobuf-compiler-grpc libprotobuf-dev chromium curl

step "go test -race${CI:+ (CI=$CI)}"
# The failover suite's counts (double holders, duplicates, lost messages)
# go to this file, printed after the run: go test shows a passing package's
# output only with -v.
export COORDD_FAILOVER_SUMMARY="$failover_summary"
rc=0
go test -race -count=1 -timeout 15m ./... || rc=$?
step "failover suite summary"
cat "$COORDD_FAILOVER_SUMMARY"
[ "$rc" = 0 ] || exit "$rc"

step "fuzz (scripts/fuzz.sh 3: every fuzz target for 3 s, without -race; the Redis ones on the standalone server above)"
scripts/fuzz.sh 3

step "deploy/ (manifests, compose, Prometheus rules, Grafana, Dockerfile; a module of its own)"
(cd deploy && go vet ./... && go test -count=1 ./...)

step "examples (a module of its own; PostgreSQL from COORDD_TEST_POSTGRES)"
(cd examples && go vet ./... && go test -race -count=1 ./...)

step "bench/ (coordbench, a module of its own: smoke runs on memory and on the Cluster with --baseline)"
(cd bench && go vet ./... && go test -race -count=1 ./...)

# The gRPC acceptance tests and the Go client's again, end to end on the
# Redis Cluster. Not again on the standalone Redis (-coordd.backend=redis
# still works by hand): the store's conformance suite runs on both
# (internal/store/redis TestConformanceStandalone and ...Cluster), and the
# two modes differ only below the store interface, while a second pass here
# costs about 2.5 of CI's 30 minutes.
step "go test -race ./internal/server ./client on cluster"
go test -race -count=1 -timeout 10m ./internal/server ./client -args -coordd.backend=cluster
