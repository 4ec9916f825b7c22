#!/usr/bin/env bash
# The Redis instances the tests run against: a standalone redis-server and a
# Redis Cluster of 3 masters with 1 replica each, on loopback ports of their
# own (never 6379), from Debian's redis-server package (installed with apt-get
# when missing). No persistence; every file lives under one directory.
#
# Usage: scripts/redis-cluster.sh start    start them (or reuse them if they
#                                          are already up and healthy), wait
#                                          until cluster_state:ok and every
#                                          master has its replica, then print
#                                          the exports below
#        scripts/redis-cluster.sh stop     shut them down, remove the directory
#        scripts/redis-cluster.sh status   say what runs; exit 0 if healthy
#        scripts/redis-cluster.sh env      print the exports only
#
#   eval "$(scripts/redis-cluster.sh start)" && go test ./...
#
# Progress goes to stderr, the exports to stdout:
#   export COORDD_TEST_REDIS=127.0.0.1:16379
#   export COORDD_TEST_REDIS_CLUSTER=127.0.0.1:17001,...,127.0.0.1:17006
#
# Environment:
#   COORDD_REDIS_PORT        standalone port (default 16379)
#   COORDD_REDIS_BASE_PORT   cluster nodes use BASE+1..BASE+6 (default 17000);
#                            their cluster bus ports are those plus 10000
#   COORDD_REDIS_DIR         configs, logs and nodes.conf files
#                            (default ${TMPDIR:-/tmp}/coordd-redis)
#   COORDD_REDIS_TIMEOUT     seconds start waits for a healthy cluster (30)
set -euo pipefail

standalone_port=${COORDD_REDIS_PORT:-16379}
base_port=${COORDD_REDIS_BASE_PORT:-17000}
dir=${COORDD_REDIS_DIR:-${TMPDIR:-/tmp}/coordd-redis}
timeout=${COORDD_REDIS_TIMEOUT:-30}
node_timeout_ms=2000
masters=3
replicas=1
nodes=$((masters * (1 + replicas)))

case $dir in
/*) ;;
*) dir=$PWD/$dir ;;
esac
dir=${dir%/}

cluster_ports=()
for i in $(seq 1 "$nodes"); do
	cluster_ports+=($((base_port + i)))
done
all_ports=("$standalone_port" "${cluster_ports[@]}")

log() { printf 'redis-cluster: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# cli PORT ARGS...: one command to one of our nodes, with a short timeout so
# that a wedged port cannot hang the script. Redis' CRLFs are removed.
cli() {
	local port=$1
	shift
	timeout 5 redis-cli -h 127.0.0.1 -p "$port" --no-auth-warning "$@" 2>/dev/null | tr -d '\r'
}

# field NAME: the value of NAME: in INFO output on stdin.
field() { sed -n "s/^$1://p"; }

node_dir() { printf '%s/%s' "$dir" "$1"; }
conf_file() { printf '%s/%s/redis.conf' "$dir" "$1"; }

# port_open PORT: something accepts connections on 127.0.0.1:PORT.
port_open() {
	timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# ours PORT: the server on PORT is one this script started with this
# directory (it reports our config file).
ours() {
	local cf
	cf=$(cli "$1" info server | field config_file) || return 1
	[ "$cf" = "$(conf_file "$1")" ]
}

ensure_redis() {
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
		return
	fi
	local sudo=()
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null; then
			sudo=(sudo)
		else
			die "redis-server is not installed and this is not root (and there is no sudo): install Debian's redis-server package (apt-get install redis-server)"
		fi
	fi
	if ! command -v apt-get >/dev/null; then
		die "redis-server is not installed and there is no apt-get: install redis-server (7.0 or later) and redis-cli"
	fi
	log "installing redis-server with apt-get"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >&2
	if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
		die "redis-server or redis-cli still missing after apt-get install redis-server"
	fi
}

write_conf() {
	local port=$1 cluster=$2 d
	d=$(node_dir "$port")
	mkdir -p "$d"
	{
		echo "# written by scripts/redis-cluster.sh; restart with: redis-server $(conf_file "$port")"
		echo "bind 127.0.0.1"
		echo "port $port"
		echo "daemonize yes"
		echo "dir $d"
		echo "pidfile $d/redis.pid"
		echo "logfile $d/redis.log"
		echo 'save ""'
		echo "appendonly no"
		# A replica's first sync starts at once instead of after 5 s.
		echo "repl-diskless-sync-delay 0"
		if [ "$cluster" = 1 ]; then
			echo "cluster-enabled yes"
			echo "cluster-config-file nodes.conf"
			echo "cluster-node-timeout $node_timeout_ms"
		fi
	} >"$(conf_file "$port")"
}

# healthy: every node is ours and up, the standalone answers, every cluster
# node reports cluster_state:ok with all slots ok and knows all nodes, there
# are $masters masters, and each has $replicas replicas online.
healthy() {
	local port info n_masters=0
	ours "$standalone_port" || return 1
	for port in "${cluster_ports[@]}"; do
		info=$(cli "$port" info server replication) || return 1
		[ "$(field config_file <<<"$info")" = "$(conf_file "$port")" ] || return 1
		case $(field role <<<"$info") in
		master)
			n_masters=$((n_masters + 1))
			[ "$(field connected_slaves <<<"$info")" = "$replicas" ] || return 1
			[ "$(grep -c '^slave[0-9]*:.*state=online' <<<"$info")" = "$replicas" ] || return 1
			;;
		slave)
			[ "$(field master_link_status <<<"$info")" = up ] || return 1
			;;
		*) return 1 ;;
		esac
		info=$(cli "$port" cluster info) || return 1
		[ "$(field cluster_state <<<"$info")" = ok ] || return 1
		[ "$(field cluster_slots_ok <<<"$info")" = 16384 ] || return 1
		[ "$(field cluster_known_nodes <<<"$info")" = "$nodes" ] || return 1
	done
	[ "$n_masters" = "$masters" ]
}

print_env() {
	local addrs=() port
	for port in "${cluster_ports[@]}"; do
		addrs+=("127.0.0.1:$port")
	done
	printf 'export COORDD_TEST_REDIS=127.0.0.1:%s\n' "$standalone_port"
	printf 'export COORDD_TEST_REDIS_CLUSTER=%s\n' "$(
		IFS=,
		echo "${addrs[*]}"
	)"
}

do_stop() {
	local port stopped=() deadline
	for port in "${all_ports[@]}"; do
		port_open "$port" || continue
		if ! ours "$port"; then
			log "port $port: not ours (no config file $(conf_file "$port")), left alone"
			continue
		fi
		cli "$port" shutdown nosave >/dev/null || true
		stopped+=("$port")
	done
	deadline=$((SECONDS + 15))
	for port in "${stopped[@]}"; do
		while port_open "$port"; do
			[ "$SECONDS" -lt "$deadline" ] || die "port $port: redis-server did not exit after SHUTDOWN NOSAVE"
			sleep 0.1
		done
	done
	[ "${#stopped[@]}" = 0 ] || log "stopped ${stopped[*]}"
	# Remove only what this script creates, so that a mistaken
	# COORDD_REDIS_DIR cannot take anything else with it.
	for port in "${all_ports[@]}"; do
		rm -rf "$(node_dir "$port")"
	done
	rm -f "$dir/cluster-create.log"
	[ ! -d "$dir" ] || rmdir "$dir" 2>/dev/null || log "left $dir in place: it holds files this script did not create"
}

do_start() {
	local port start=$SECONDS deadline addrs=()
	ensure_redis
	if healthy; then
		log "reusing the running instances (ports $standalone_port, ${cluster_ports[0]}-${cluster_ports[-1]}; $dir)"
		print_env
		return
	fi
	# Whatever of ours runs is stale or half started: start over.
	do_stop
	for port in "${all_ports[@]}"; do
		if port_open "$port"; then
			die "port $port is in use by something else; set COORDD_REDIS_PORT / COORDD_REDIS_BASE_PORT to free ports"
		fi
	done
	for port in "${cluster_ports[@]}"; do
		if port_open $((port + 10000)); then
			die "port $((port + 10000)) (cluster bus of $port) is in use by something else; set COORDD_REDIS_BASE_PORT to free ports"
		fi
	done

	log "starting redis-server on 127.0.0.1:$standalone_port and a cluster on ${cluster_ports[0]}-${cluster_ports[-1]} ($dir)"
	mkdir -p "$dir"
	write_conf "$standalone_port" 0
	for port in "${cluster_ports[@]}"; do
		write_conf "$port" 1
	done
	for port in "${all_ports[@]}"; do
		redis-server "$(conf_file "$port")" >&2 || die "redis-server on port $port did not start; see $(node_dir "$port")/redis.log"
	done
	deadline=$((SECONDS + 10))
	for port in "${all_ports[@]}"; do
		until [ "$(cli "$port" ping)" = PONG ]; do
			[ "$SECONDS" -lt "$deadline" ] || die "redis-server on port $port does not answer PING; see $(node_dir "$port")/redis.log"
			sleep 0.1
		done
	done

	for port in "${cluster_ports[@]}"; do
		addrs+=("127.0.0.1:$port")
	done
	if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes \
		>"$dir/cluster-create.log" 2>&1; then
		cat "$dir/cluster-create.log" >&2
		die "redis-cli --cluster create failed"
	fi
	log "created the cluster (redis-cli output: $dir/cluster-create.log)"

	deadline=$((SECONDS + timeout))
	until healthy; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			do_status >&2 || true
			die "the cluster is not healthy after ${timeout}s; logs are in $dir/*/redis.log"
		fi
		sleep 0.2
	done
	log "ready in $((SECONDS - start))s"
	print_env
}

do_status() {
	local port state role info
	for port in "${all_ports[@]}"; do
		if ! port_open "$port"; then
			state="not running"
		elif ! ours "$port"; then
			state="in use by something else"
		elif [ "$port" = "$standalone_port" ]; then
			state="standalone, $(cli "$port" ping)"
		else
			info=$(cli "$port" info replication)
			role=$(field role <<<"$info")
			if [ "$role" = master ]; then
				role="master, $(field connected_slaves <<<"$info") replica(s)"
			else
				role="replica of $(field master_port <<<"$info"), link $(field master_link_status <<<"$info")"
			fi
			state="$role, cluster_state:$(cli "$port" cluster info | field cluster_state)"
		fi
		printf '127.0.0.1:%s  %s\n' "$port" "$state"
	done
	if healthy; then
		echo "healthy"
	else
		echo "not healthy"
		return 1
	fi
}

case ${1:-} in
start) do_start ;;
stop) do_stop ;;
status) do_status ;;
env) print_env ;;
*)
	echo "usage: $0 start|stop|status|env" >&2
	exit 2
	;;
esac
