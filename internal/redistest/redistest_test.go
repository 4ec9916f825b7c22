package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	o := redistest.Options(addr)
	// go-redis' default pool: with one connection, a single failed dial
	// (while the server is stopped) fails every call until the pool's
	// background redial succeeds, and these tests restart servers.
	o.PoolSize = 0
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newClusterClient(t *testing.T, addrs []string) *redis.ClusterClient {
	t.Helper()
	o := redistest.ClusterOptions(addrs)
	o.PoolSize = 0 // as newClient's: these tests kill and restart nodes
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestStandalone(t *testing.T) {
	t.Parallel()
	s := redistest.StartStandalone(t)
	c := newClient(t, s.Addr())
	if err := c.Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if err := c.Ping(ctx(t)).Err(); err == nil {
		t.Fatal("PING answered after Stop")
	}
	s.Start()
	if err := c.Get(ctx(t), "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after a restart: %v, want redis.Nil (no persistence)", err)
	}

	s.Kill()
	if s.Running() {
		t.Fatal("running after Kill")
	}
	s.Start()
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING after Kill and Start: %v", err)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := redistest.StartCluster(t, 3, 1)
	t.Logf("3x1 cluster up in %v", time.Since(start).Round(time.Millisecond))
	if n := len(c.Addrs()); n != 6 {
		t.Fatalf("%d nodes, want 6", n)
	}
	checkRoles(t, c, 3, 3)
	for _, n := range c.Nodes() {
		cl := newClient(t, n.Addr())
		if err := cl.Ping(ctx(t)).Err(); err != nil {
			t.Fatalf("PING %s: %v", n.Addr(), err)
		}
		info, err := cl.ClusterInfo(ctx(t)).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("CLUSTER INFO %s: %v\n%s", n.Addr(), err, info)
		}
	}

	// MasterFor names the node that holds a key written through a
	// cluster client.
	cc := newClusterClient(t, c.Addrs())
	keys := []string{"a", "b", "c", "{user:1}:x", "{user:1}:y", "queue:{q}", "{}x", "x{}{a}", "x{a}y{b}", "{a"}
	for _, k := range keys {
		if err := cc.Set(ctx(t), k, "v-"+k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		m := c.MasterFor(k)
		got, err := newClient(t, m.Addr()).Get(ctx(t), k).Result()
		if err != nil || got != "v-"+k {
			t.Fatalf("GET %s on MasterFor = %s: %q, %v", k, m.Addr(), got, err)
		}
		slot, err := cc.ClusterKeySlot(ctx(t), k).Result()
		if err != nil || int(slot) != redistest.Slot(k) {
			t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT = %d (%v)", k, redistest.Slot(k), slot, err)
		}
	}

	// Kill the master of "a": its replica takes over, with the data it
	// had replicated.
	old := c.MasterFor("a")
	if err := newClient(t, old.Addr()).Do(ctx(t), "WAIT", 1, 5000).Err(); err != nil {
		t.Fatalf("WAIT: %v", err)
	}
	start = time.Now()
	old.Kill()
	c.WaitHealthy(30 * time.Second)
	t.Logf("replica promoted and cluster healthy %v after the kill", time.Since(start).Round(time.Millisecond))
	promoted := c.MasterFor("a")
	if promoted == old {
		t.Fatal("MasterFor still names the killed master")
	}
	checkRoles(t, c, 3, 2)
	if got, err := newClient(t, promoted.Addr()).Get(ctx(t), "a").Result(); err != nil || got != "v-a" {
		t.Fatalf("GET a on the promoted replica: %q, %v", got, err)
	}

	// Start the killed master again: it rejoins as a replica of the node
	// that took its slots.
	start = time.Now()
	old.Start()
	c.WaitHealthy(30 * time.Second)
	t.Logf("restarted former master rejoined %v after its start", time.Since(start).Round(time.Millisecond))
	checkRoles(t, c, 3, 3)
	if !slices.Contains(c.Replicas(), old) {
		t.Fatalf("the restarted former master %s is not a replica", old.Addr())
	}
	if c.MasterFor("a") != promoted {
		t.Fatal("the restarted former master took its slots back")
	}

	// Stop every node and start them again: same roles, no data, and a
	// healthy cluster.
	masters := c.Masters()
	c.StopAll()
	for _, n := range c.Nodes() {
		if n.Running() {
			t.Fatalf("%s running after StopAll", n.Addr())
		}
	}
	start = time.Now()
	c.StartAll()
	c.WaitHealthy(30 * time.Second)
	t.Logf("cluster healthy %v after StartAll", time.Since(start).Round(time.Millisecond))
	checkRoles(t, c, 3, 3)
	if got := c.Masters(); !slices.Equal(got, masters) {
		t.Errorf("masters after StopAll+StartAll: %v, want %v (no failover)", addrs(got), addrs(masters))
	}
	cc2 := newClusterClient(t, c.Addrs())
	for _, k := range keys {
		if err := cc2.Get(ctx(t), k).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET %s after StopAll+StartAll: %v, want redis.Nil (no persistence)", k, err)
		}
	}
	if err := cc2.Set(ctx(t), "a", "again", 0).Err(); err != nil {
		t.Fatalf("SET after StopAll+StartAll: %v", err)
	}
}

func checkRoles(t *testing.T, c *redistest.ClusterProc, masters, replicas int) {
	t.Helper()
	if m, r := len(c.Masters()), len(c.Replicas()); m != masters || r != replicas {
		t.Fatalf("%d masters and %d replicas, want %d and %d", m, r, masters, replicas)
	}
}

func addrs(ns []*redistest.Server) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Addr())
	}
	return out
}

func TestSlot(t *testing.T) {
	// More keys are checked against CLUSTER KEYSLOT in TestCluster.
	for key, want := range map[string]int{
		"123456789": 0x31C3, // the CRC16/XMODEM check value
		"foo":       12182,
		"{a}x":      15495,
		"x{a}y{b}":  redistest.Slot("a"),
	} {
		if got := redistest.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestShared uses the shared instances when they are there (through
// scripts/test.sh or scripts/redis-cluster.sh), and is skipped or fails
// like every test that needs them otherwise.
func TestShared(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		if err := newClient(t, redistest.Standalone(t)).Ping(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := redistest.Cluster(t)
		if len(addrs) != 6 {
			t.Errorf("%d addresses, want 6", len(addrs))
		}
		cc := newClusterClient(t, addrs)
		info, err := cc.ClusterInfo(ctx(t)).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("CLUSTER INFO: %v\n%s", err, info)
		}
		k := fmt.Sprintf("redistest:%d", time.Now().UnixNano())
		if err := cc.Set(ctx(t), k, "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := cc.Del(ctx(t), k).Err(); err != nil {
			t.Fatal(err)
		}
	})
}

// recorder stands in for a testing.TB to see whether a helper fails or
// skips.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func run(t *testing.T, f func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// TestMissing: with the environment variables unset, a test fails under CI
// and is skipped otherwise, and either way says how to start Redis.
func TestMissing(t *testing.T) {
	t.Setenv(redistest.EnvStandalone, "")
	t.Setenv(redistest.EnvCluster, "")
	for _, tc := range []struct {
		ci   string
		fail bool
	}{{"", false}, {"false", false}, {"0", false}, {"true", true}, {"1", true}} {
		t.Setenv("CI", tc.ci)
		for name, f := range map[string]func(testing.TB){
			"Standalone": func(tb testing.TB) { redistest.Standalone(tb) },
			"Cluster":    func(tb testing.TB) { redistest.Cluster(tb) },
		} {
			r := run(t, f)
			msg := r.skip
			if tc.fail {
				msg = r.fatal
			}
			if msg == "" || (r.fatal != "") != tc.fail || !strings.Contains(msg, "scripts/redis-cluster.sh start") {
				t.Errorf("CI=%q %s: fatal %q, skip %q", tc.ci, name, r.fatal, r.skip)
			}
		}
	}
}
