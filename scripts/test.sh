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
lanes=""
download_log=""
download_pid=""
failover_summary=$(mktemp)
redis_started=0
cleanup() {
	if [ -n "$gen" ]; then rm -rf "$gen"; fi
	if [ -n "$lanes" ]; then rm -rf "$lanes"; fi
	if [ -n "$download_pid" ]; then kill "$download_pid" 2>/dev/null || true; fi
	rm -f "$failover_summary" "$download_log"
	if [ "$redis_started" = 1 ]; then scripts/redis-cluster.sh stop || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# On a cold machine: every module's dependencies fetched in the background
# while the lint steps use the CPU (go commands share the module cache
# safely, each waiting on the other's download of a module).
download_log=$(mktemp)
(for m in . tools bench deploy examples; do (cd "$m" && go mod download) || exit 1; done) > "$download_log" 2>&1 &
download_pid=$!

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

# The rest in two lanes side by side (each waits on Redis and timers as
# much as on the CPU): the bench module alone, and the deploy and examples
# modules and the second pass on the Cluster. Each lane's output is
# printed when both are done, under its steps' headings.
#
# The second pass: the gRPC acceptance tests and the Go client's again,
# end to end on the Redis Cluster. Not again on the standalone Redis
# (-coordd.backend=redis still works by hand): the store's conformance
# suite runs on both (internal/store/redis TestConformanceStandalone and
# ...Cluster), and the two modes differ only below the store interface.
step "in two lanes: bench/; then deploy/, examples/ and ./internal/server ./client on the Cluster"
if ! wait "$download_pid"; then
	echo "go mod download failed (the steps below fetch what they need themselves):"
	cat "$download_log"
fi
download_pid=""
lanes=$(mktemp -d)
lane_pids=()
lane() { # lane NAME: the steps read from stdin, run by bash in the background, output to $lanes/NAME.out
	local name=$1
	cat > "$lanes/$name.sh"
	(
		rc=0
		bash -euo pipefail "$lanes/$name.sh" > "$lanes/$name.out" 2>&1 || rc=$?
		echo "$rc" > "$lanes/$name.rc"
	) &
	lane_pids+=($!)
}
lane bench <<'LANE'
printf '== bench/ (coordbench, a module of its own: smoke runs on memory and on the Cluster with --baseline)\n'
cd bench && go vet ./... && go test -race -count=1 ./...
LANE
lane rest <<'LANE'
printf '== deploy/ (manifests, compose, Prometheus rules, Grafana, Dockerfile, the Helm chart; a module of its own)\n'
(cd deploy && go vet ./... && go test -count=1 ./...)
printf '\n== examples (a module of its own; PostgreSQL from COORDD_TEST_POSTGRES)\n'
(cd examples && go vet ./... && go test -race -count=1 ./...)
printf '\n== go test -race ./internal/server ./client on the Cluster\n'
go test -race -count=1 -timeout 10m ./internal/server ./client -args -coordd.backend=cluster
LANE
wait "${lane_pids[@]}"
failed=0
for name in bench rest; do
	cat "$lanes/$name.out"
	rc=$(cat "$lanes/$name.rc")
	if [ "$rc" != 0 ]; then echo "== lane $name failed (exit $rc)"; failed=1; fi
done
[ "$failed" = 0 ]
step "done"
