#!/usr/bin/env bash
# Every Go fuzz target, each for a short bounded time, one after another (a
# fuzz run uses every core). Targets are found with go test -list '^Fuzz' in
# the packages whose test files define one. Prints one line per target; a
# failure also prints the fuzzer's report, including where it wrote the
# failing input (testdata/fuzz/<FuzzName>/ of the package, which then fails
# the plain go test run too until the bug is fixed).
#
# Usage: scripts/fuzz.sh [seconds]    seconds per target (default 3)
#
# The seeds (each target's f.Add calls, and the inputs the fuzzer found in
# testdata/fuzz) run as ordinary tests in go test ./...; this script is the
# part that searches for new inputs.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-3}
case $secs in
'' | *[!0-9]* | 0) echo "usage: scripts/fuzz.sh [seconds]  (a whole number > 0)" >&2; exit 2 ;;
esac

out=$(mktemp)
trap 'rm -f "$out"' EXIT

failed=0
total=0
# The packages with a fuzz target: those whose _test.go files define one.
while read -r dir pkg; do
	grep -qs '^func Fuzz[A-Z0-9_]' "$dir"/*_test.go || continue
	if ! list=$(go test -run '^$' -list '^Fuzz' "$pkg" 2>&1); then
		printf 'FAIL %-40s (go test -list failed)\n' "${pkg#github.com/coordd/coordd/}"
		printf '%s\n' "$list" | sed 's/^/    /' | tail -40
		failed=$((failed + 1))
		continue
	fi
	targets=$(printf '%s\n' "$list" | grep '^Fuzz' || true)
	for target in $targets; do
		total=$((total + 1))
		start=$SECONDS
		# Go 1.26's fuzz coordinator can fail a target with a bare "context
		# deadline exceeded" as -fuzztime runs out, with no failing input
		# (go.dev/issue/75804, fixed in Go 1.27). Such a run is tried again,
		# twice at most; a real failure always writes its input to
		# testdata/fuzz/<target>, and is never tried again.
		corpus="$dir/testdata/fuzz/$target"
		for try in 1 2 3; do
			before=$( (ls "$corpus" 2>/dev/null || true) | wc -l)
			if go test -v -run '^$' -fuzz "^${target}\$" -fuzztime "${secs}s" -timeout "$((secs + 300))s" "$pkg" >"$out" 2>&1; then
				status=ok
				break
			fi
			status=FAIL
			after=$( (ls "$corpus" 2>/dev/null || true) | wc -l)
			if [ "$try" = 3 ] || [ "$after" != "$before" ] ||
				! grep -A1 -e "^--- FAIL: ${target} " "$out" | grep -qx '    context deadline exceeded'; then
				break
			fi
			echo "     $target: the fuzz coordinator's deadline race (go.dev/issue/75804), no failing input: again" >&2
		done
		if [ "$status" = FAIL ]; then
			failed=$((failed + 1))
		fi
		# The fuzzer's last progress line, "fuzz: elapsed: Ts, execs: N (R/sec), ...",
		# as the total and the average over the run (R is the rate of the last
		# interval only, often 0: workers report their counts in batches);
		# or, if the time ran out first, how far the seed corpus got.
		stats=$(sed -n 's/.*fuzz: elapsed: \([0-9]*\)s, execs: \([0-9]*\) .*/\1 \2/p' "$out" | tail -1 |
			awk '{ printf "execs: %d in %ds (%d/sec)", $2, $1, ($1 > 0 ? $2 / $1 : $2) }')
		if [ -z "$stats" ]; then
			stats=$(grep -o 'gathering baseline coverage: [0-9]*/[0-9]*' "$out" | tail -1 || true)
		fi
		# A target that needs what is missing (Redis, outside CI) skips.
		if grep -q -e '--- SKIP' "$out"; then
			stats="skipped: $(grep -m1 -B1 -e '--- SKIP' "$out" | head -1 | sed 's/^ *//')"
		fi
		printf '%-4s %-40s %-28s %3ds  %s\n' "$status" "${pkg#github.com/coordd/coordd/}" "$target" "$((SECONDS - start))" "${stats:-no stats}"
		if [ "$status" = FAIL ]; then
			sed 's/^/    /' "$out" | tail -40
		fi
	done
done < <(go list -f '{{.Dir}} {{.ImportPath}}' ./...)

echo "fuzz: $total targets, $failed failed (${secs}s each)"
[ "$failed" = 0 ]
