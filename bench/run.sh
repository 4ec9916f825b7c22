#!/usr/bin/env bash
# Runs coordbench the way docs/benchmarks.md reports it: builds coordd and
# coordbench, starts coordd on STORE, runs every scenario at concurrency 64
# with coordd's PID (its CPU and RSS), and saves the table and the JSON as
# bench/results/DATE-COMMIT-STORE.{txt,json}.
#
# Usage: bench/run.sh redis|memory [more coordbench flags]
#
#   redis    coordd --store redis on the Cluster of scripts/redis-cluster.sh
#            (COORDD_TEST_REDIS_CLUSTER must be set:
#            eval "$(scripts/redis-cluster.sh start)"), with --baseline
#            against the same Cluster. Every key lives under a key prefix of
#            the run's own, deleted at the end; the Cluster is never flushed.
#   memory   coordd on the memory store (no baselines but the empty call).
#
# Environment: CB_ADDR (127.0.0.1:27070), CB_HTTP_ADDR (127.0.0.1:27071),
# CB_OUT (bench/results), CB_LOG_LEVEL (coordd's log_level, warn), CB_REF (a
# commit: measure the coordd of that commit, built from `git archive`, with
# its own Lua scripts for the direct baseline; default: the working tree),
# CB_TAG (added to the file names).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

store=${1:?usage: bench/run.sh redis|memory [coordbench flags]}
shift
addr=${CB_ADDR:-127.0.0.1:27070}
http_addr=${CB_HTTP_ADDR:-127.0.0.1:27071}
out=${CB_OUT:-$root/bench/results}
log_level=${CB_LOG_LEVEL:-warn}
ref=${CB_REF:-}
if [ -n "$ref" ]; then
	commit=$(git rev-parse --short "$ref")
else
	commit=$(git rev-parse --short HEAD)
fi
name=$out/$(date -u +%F)-$commit-$store${CB_TAG:+-$CB_TAG}
prefix=cb$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')

tmp=$(mktemp -d)
coordd_pid=""
cleanup() {
	if [ -n "$coordd_pid" ]; then
		kill -INT "$coordd_pid" 2>/dev/null || true
		wait "$coordd_pid" 2>/dev/null || true
	fi
	if [ "$store" = redis ]; then
		# Whatever the run left under its prefix, from every master.
		for a in ${COORDD_TEST_REDIS_CLUSTER//,/ }; do
			h=${a%:*} p=${a##*:}
			redis-cli -h "$h" -p "$p" info replication 2>/dev/null | grep -q '^role:master' || continue
			redis-cli -h "$h" -p "$p" --scan --pattern "$prefix:*" |
				awk '{print "UNLINK", $0}' | redis-cli -h "$h" -p "$p" >/dev/null
		done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

lua_dir=$root/internal/store/redis/lua
if [ -n "$ref" ]; then
	mkdir "$tmp/src"
	git archive "$ref" | tar -x -C "$tmp/src"
	(cd "$tmp/src" && go build -o "$tmp/coordd" ./cmd/coordd)
	lua_dir=$tmp/src/internal/store/redis/lua
else
	go build -o "$tmp/coordd" ./cmd/coordd
fi
(cd bench && go build -o "$tmp/coordbench" ./cmd/coordbench)

coordd_args=(--grpc-addr "$addr" --http-addr "$http_addr" --log-level "$log_level" --store "$store")
# The configuration the scenarios need (queue-partitions' queue), unless the
# coordd measured predates queue.partitioned (it would refuse the key).
src=$root
[ -n "$ref" ] && src=$tmp/src
if grep -q 'mapstructure:"partitioned"' "$src/internal/queue/queue.go"; then
	"$tmp/coordbench" coordd-config >"$tmp/coordd.yaml"
	coordd_args+=(--config "$tmp/coordd.yaml")
fi
# should-rate-limit's envoy ratelimit configuration, for a coordd that has
# ratelimit.envoy_config.
if grep -q 'mapstructure:"envoy_config"' "$src/cmd/coordd/config.go"; then
	mkdir -p "$tmp/envoy"
	"$tmp/coordbench" envoy-config >"$tmp/envoy/coordbench.yaml"
	export COORDD_RATELIMIT_ENVOY_CONFIG=$tmp/envoy
fi
bench_args=(--addr "$addr" --concurrency 64 --store "$store" --coordd-metrics "http://$http_addr/metrics")
case $store in
redis)
	: "${COORDD_TEST_REDIS_CLUSTER:?eval \"\$(scripts/redis-cluster.sh start)\" first}"
	export COORDD_REDIS_ADDRS=$COORDD_TEST_REDIS_CLUSTER COORDD_REDIS_MODE=cluster COORDD_REDIS_KEY_PREFIX=$prefix
	bench_args+=(--baseline --redis "$COORDD_TEST_REDIS_CLUSTER" --key-prefix "$prefix" --lua-dir "$lua_dir")
	;;
memory) ;;
*)
	echo "bench/run.sh: store $store is not redis or memory" >&2
	exit 2
	;;
esac

"$tmp/coordd" "${coordd_args[@]}" >"$tmp/coordd.log" 2>&1 &
coordd_pid=$!
for _ in $(seq 100); do
	curl -fs "http://$http_addr/healthz" >/dev/null 2>&1 && break
	kill -0 "$coordd_pid" 2>/dev/null || { cat "$tmp/coordd.log" >&2; exit 1; }
	sleep 0.1
done

mkdir -p "$out"
echo "bench/run.sh: coordd $commit on $store (pid $coordd_pid), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$tmp/coordbench" "${bench_args[@]}" --coordd-pid "$coordd_pid" \
	--label "coordd $commit, store $store${COORDD_REDIS_MODE:+ ($COORDD_REDIS_MODE)}, log_level $log_level" \
	--json "$name.json" "$@" | tee "$name.txt"
echo "bench/run.sh: saved $name.txt and $name.json" >&2
if grep -qi 'error\|panic' "$tmp/coordd.log"; then
	echo "bench/run.sh: coordd logged errors (first 20 lines):" >&2
	grep -i 'error\|panic' "$tmp/coordd.log" | head -20 >&2
fi
