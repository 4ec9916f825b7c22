#!/bin/sh
# Forms the Redis Cluster of compose.yaml from its six nodes, 3 masters with
# a replica each, once every node answers. CLUSTER MEET takes IP addresses,
# so each node's name is resolved first. On a cluster already formed it does
# nothing, so `docker compose up` may run it again.
#
#   REDIS_NODES   the nodes, host:port separated by spaces
#                 (default: redis-1:6379 ... redis-6:6379)
set -eu

nodes=${REDIS_NODES:-"redis-1:6379 redis-2:6379 redis-3:6379 redis-4:6379 redis-5:6379 redis-6:6379"}

# cli HOST:PORT ARGS...: one command to one node.
cli() {
	node=$1
	shift
	redis-cli -h "${node%:*}" -p "${node##*:}" "$@"
}

addrs=""
for node in $nodes; do
	tries=0
	until cli "$node" ping 2>/dev/null | grep -q PONG; do
		tries=$((tries + 1))
		if [ "$tries" -ge 60 ]; then
			echo "redis-cluster-init: $node does not answer" >&2
			exit 1
		fi
		sleep 1
	done
	# getent ahostsv4 prints "ADDRESS STREAM NAME" lines; take the first address.
	set -- $(getent ahostsv4 "${node%:*}")
	if [ $# -eq 0 ]; then
		echo "redis-cluster-init: cannot resolve ${node%:*}" >&2
		exit 1
	fi
	addrs="$addrs $1:${node##*:}"
done

first=${nodes%% *}
if cli "$first" cluster info | grep -q '^cluster_state:ok'; then
	echo "redis-cluster-init: the cluster is already formed"
	exit 0
fi
# shellcheck disable=SC2086 # one argument per address
redis-cli --cluster create $addrs --cluster-replicas 1 --cluster-yes

tries=0
until cli "$first" cluster info | grep -q '^cluster_state:ok'; do
	tries=$((tries + 1))
	if [ "$tries" -ge 30 ]; then
		echo "redis-cluster-init: the cluster did not reach cluster_state:ok" >&2
		exit 1
	fi
	sleep 1
done
echo "redis-cluster-init: cluster_state:ok"
