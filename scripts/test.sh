#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this): formatting, vet,
# staticcheck, buf lint, a check that the generated code matches the .proto
# files, and every Go test with the race detector.
#
# Usage: scripts/test.sh            everything
#        scripts/test.sh -short     skip the lint steps, run the tests only
set -euo pipefail
cd "$(dirname "$0")/.."

lint=1
[ "${1:-}" = "-short" ] && lint=0
step() { printf '\n== %s\n' "$*"; }
tool() { go tool -modfile=tools/go.mod "$@"; }

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
	trap 'rm -rf "$gen"' EXIT
	tool buf generate -o "$gen"
	diff -r "$gen/api/gen" api/gen
fi

step "go test -race"
go test -race -count=1 -timeout 15m ./...
