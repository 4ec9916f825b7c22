// Package redistest gives tests real Redis servers, from Debian's
// redis-server package (7.0 or later), in two kinds.
//
// # Shared instances
//
// [Standalone] and [Cluster] return the addresses of the instances that
// scripts/redis-cluster.sh starts (a standalone server on 127.0.0.1:16379
// and a Cluster of 3 masters with 1 replica each on 127.0.0.1:17001-17006),
// which it exports as COORDD_TEST_REDIS and COORDD_TEST_REDIS_CLUSTER:
//
//	eval "$(scripts/redis-cluster.sh start)"
//	go test ./...
//
// ./scripts/test.sh does this itself. Every test package of a run uses the
// same instances at the same time, so a test that uses them must keep to
// keys of its own (a random namespace or prefix), and must never FLUSHALL,
// FLUSHDB, CONFIG SET, or stop, kill or fail over a node.
//
// # Private instances
//
// [StartStandalone] and [StartCluster] start redis-server processes of the
// test's own, on free loopback ports, in t.TempDir(), and end them when the
// test ends. They are for destructive tests: killing masters, stopping every
// node, restarting with the data lost. Each node has its own redis.conf, so
// [Server.Start] restarts it with the same port and configuration.
// Persistence is off (save "", appendonly no): a restarted node has no data.
// A cluster node's cluster configuration (nodes.conf: its node ID, its
// role, who owns which slots, the config epochs) stays on disk, which Redis
// writes whatever the persistence settings, so a restarted node rejoins as
// itself rather than as a stranger. A 3-master cluster with replicas takes
// about 3-4 s to start (redis-cli --cluster create waits in steps of a
// second).
//
// The nodes run with cluster-node-timeout 2000 (ms) and
// repl-diskless-sync-delay 0 (a replica's first sync starts at once, not
// after Redis' default 5 s); everything else is Redis' default, including
// cluster-require-full-coverage yes: a cluster with an uncovered slot
// answers CLUSTERDOWN for every key.
//
// # What Redis 7.0 does (measured with 7.0.15, node timeout 2 s)
//
//   - A killed master: for the node timeout and until a majority of the
//     masters agree that it failed (2-4 s), the other nodes keep reporting
//     cluster_state:ok and keep sending its slots' keys to it (connection
//     refused). Then every node reports cluster_state:fail and answers
//     CLUSTERDOWN for every key, those of healthy masters too (full
//     coverage is required), for about a second, until its replica is
//     elected: 4-5 s after the kill in all. This is why
//     [ClusterProc.Healthy] checks that every slot's master is running, not
//     only cluster_state.
//   - The killed master restarted after the failover: it comes back with its
//     node ID and old slots from nodes.conf, learns that a higher config
//     epoch owns them, and within about half a second becomes a replica of
//     the promoted node and resyncs from it (it has no data of its own).
//   - A master restarted before its replica took over (within the node
//     timeout): it stays master of its slots, empty, and its replica
//     resyncs from it and drops its copy, so everything in those slots is
//     lost without any failover. This is what no persistence means, and
//     why a fence must not depend on a counter kept in Redis alone.
//   - Every node stopped ([ClusterProc.StopAll]) or killed, then started
//     again ([ClusterProc.StartAll]): every node keeps its role from
//     nodes.conf, there is no failover, and the data is gone. The masters
//     report cluster_state:fail for about 2-3 s after they start (Redis makes
//     a restarted master wait before it accepts writes again) while the
//     replicas already report ok; then the state is ok everywhere.
//
// # When Redis is missing
//
// Nothing is skipped silently. When the environment variables are unset, or
// redis-server or redis-cli is not installed, the test fails if the CI
// environment variable is set (to anything but "", "0" or "false"), and is
// skipped otherwise, with a message that says how to get Redis.
package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The environment variables scripts/redis-cluster.sh exports.
const (
	// EnvStandalone is the address (host:port) of a standalone server.
	EnvStandalone = "COORDD_TEST_REDIS"
	// EnvCluster is the comma-separated addresses of a Redis Cluster's
	// nodes.
	EnvCluster = "COORDD_TEST_REDIS_CLUSTER"
)

const startHint = `start Redis with: eval "$(scripts/redis-cluster.sh start)" (or run ./scripts/test.sh)`

// Standalone returns the address of the shared standalone Redis server from
// COORDD_TEST_REDIS, after checking that it answers PING.
func Standalone(t testing.TB) string {
	t.Helper()
	addr := strings.TrimSpace(os.Getenv(EnvStandalone))
	if addr == "" {
		missing(t, EnvStandalone+" is not set")
	}
	if err := ping(addr); err != nil {
		t.Fatalf("redistest: %s=%s does not answer: %v; %s", EnvStandalone, addr, err, startHint)
	}
	return addr
}

// Cluster returns the node addresses of the shared Redis Cluster from
// COORDD_TEST_REDIS_CLUSTER, after checking that each answers PING.
func Cluster(t testing.TB) []string {
	t.Helper()
	var addrs []string
	for _, a := range strings.Split(os.Getenv(EnvCluster), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		missing(t, EnvCluster+" is not set")
	}
	for _, a := range addrs {
		if err := ping(a); err != nil {
			t.Fatalf("redistest: %s: node %s does not answer: %v; %s", EnvCluster, a, err, startHint)
		}
	}
	return addrs
}

// CI reports whether the tests run under CI (the CI environment variable
// is set to anything but "", "0" or "false"), where a missing Redis fails a
// test instead of skipping it.
func CI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "0", "false":
		return false
	}
	return true
}

// missing fails the test under CI and skips it otherwise.
func missing(t testing.TB, why string) {
	t.Helper()
	if CI() {
		t.Fatalf("redistest: %s, and CI requires Redis; %s", why, startHint)
	}
	t.Skipf("redistest: %s; %s", why, startHint)
}

// binaries returns the paths of redis-server and redis-cli, or fails or
// skips the test (see missing) when they are not installed.
func binaries(t testing.TB) (server, cli string) {
	t.Helper()
	server, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err1 != nil || err2 != nil {
		why := "redis-server or redis-cli is not installed (Debian: apt-get install redis-server; scripts/redis-cluster.sh start installs it)"
		if CI() {
			t.Fatalf("redistest: %s, and CI requires Redis", why)
		}
		t.Skipf("redistest: %s", why)
	}
	return server, cli
}

// client returns a client for one-off administrative commands (Options).
func client(addr string) *redis.Client { return redis.NewClient(Options(addr)) }

// Options are the options of a client of one node for a test's own
// commands — administrative ones (CONFIG SET, INFO), or reading and
// changing keys behind a store's back: no retries, short timeouts, RESP2,
// none of go-redis' optional handshakes, one connection. (A store's own
// client comes from store/redis.Open, or NewClient for a client alone.)
func Options(addr string) *redis.Options {
	return &redis.Options{
		Addr:                     addr,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		DialerRetries:            1,
		DialTimeout:              time.Second,
		ReadTimeout:              2 * time.Second,
		WriteTimeout:             2 * time.Second,
		PoolSize:                 1,
	}
}

// ClusterOptions are Options for a client of the Cluster that addrs (any of
// its nodes) belong to: the same settings, for each node's connections.
func ClusterOptions(addrs []string) *redis.ClusterOptions {
	o := Options("")
	return &redis.ClusterOptions{
		Addrs:                    addrs,
		Protocol:                 o.Protocol,
		DisableIdentity:          o.DisableIdentity,
		MaintNotificationsConfig: o.MaintNotificationsConfig,
		MaxRetries:               o.MaxRetries,
		DialerRetries:            o.DialerRetries,
		DialTimeout:              o.DialTimeout,
		ReadTimeout:              o.ReadTimeout,
		WriteTimeout:             o.WriteTimeout,
		PoolSize:                 o.PoolSize,
	}
}

// do runs one command against addr.
func do(addr string, args ...any) (any, error) {
	c := client(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

// doText runs one command whose reply is text (INFO, CLUSTER NODES).
func doText(addr string, args ...any) (string, error) {
	v, err := do(addr, args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%v: reply %T, want text", args, v)
	}
	return s, nil
}

func ping(addr string) error {
	_, err := do(addr, "PING")
	return err
}

// infoField returns the value of name in INFO or CLUSTER INFO text.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
