package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// renew and check-fence against a lock taken with the Lock RPC; the token
// comes from $COORDCTL_TOKEN or --token, never an argument.
func TestRenewAndCheckFence(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCtl(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := coordv1.NewLockServiceClient(d.conn(t)).Lock(ctx, &coordv1.LockRequest{Name: "l", Ttl: durationpb.New(time.Minute)})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock = %v, %v", g, err)
	}
	want(t, c.run("renew", "l", "--ttl", "1m"), 2, "", "needs a token: set $COORDCTL_TOKEN")
	want(t, c.run("--token", g.GetToken(), "renew", "l", "--ttl", "2m"), 0, "renewed fence=", "")
	c.env = []string{"COORDCTL_TOKEN=" + g.GetToken()}
	want(t, c.run("renew", "l", "--ttl", "2m"), 0, "ttl=2m0s", "")
	c.env = []string{"COORDCTL_TOKEN=0123456789abcdef0123456789abcdef"}
	want(t, c.run("renew", "l", "--ttl", "1m"), 1, "", "FAILED_PRECONDITION (LOCK_NOT_HELD)")
	want(t, c.run("check-fence", "l", strconv.FormatUint(g.GetFence(), 10)), 0, "current", "")
	want(t, c.run("check-fence", "l", strconv.FormatUint(g.GetFence()-1, 10)), 1, "not current", "is no live holder's")
	want(t, c.run("check-fence", "l", "x"), 2, "", "not a whole number")
}

// get-semaphore and leader show who holds, and exit 1 for no leader.
func TestGetSemaphoreAndLeader(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCtl(t, d)
	want(t, c.run("get-semaphore", "pool"), 0, "limit=0 holders=0 waiters=0", "")
	want(t, c.run("leader", "sched"), 1, "no leader", `election "sched" has no leader`)
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := c.start("lock", "--limit", "2", "pool", "--", "sh", "-c", "echo x > held; while [ ! -e go ]; do sleep 0.05; done")
	waitFile(t, c.dir+"/held", 10*time.Second)
	want(t, c.run("get-semaphore", "pool"), 0, "limit=2 holders=1 waiters=0\nholder owner=", "")
	touch("go")
	want(t, p.wait(10*time.Second), 0, "", "")
	e := c.start("elect", "sched", "--value", "node-a", "--", "sh", "-c", "echo x > leading; while [ ! -e stop ]; do sleep 0.05; done")
	waitFile(t, c.dir+"/leading", 10*time.Second)
	want(t, c.run("leader", "sched"), 0, `leader value="node-a" fence=`, "")
	touch("stop")
	want(t, e.wait(10*time.Second), 0, "", "")
}

// extend keeps a claim; redrive moves dead letters back.
func TestExtendAndRedrive(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	want(t, c.run("enqueue", "q", "--max-attempts", "1", "hi"), 0, "message_id=", "")
	r := c.run("claim", "q", "--visibility", "1s")
	receipt := regexp.MustCompile(`receipt=(\S+)`).FindStringSubmatch(r.stdout)
	if receipt == nil {
		t.Fatalf("claim: %v", r)
	}
	want(t, c.run("extend", "q", receipt[1], "--visibility", "1m"), 0, "extended expire_time=", "")
	want(t, c.run("extend", "q", receipt[1]), 2, "", "--visibility is required")
	want(t, c.run("nack", "q", receipt[1]), 0, "dead-lettered", "")
	want(t, c.run("redrive", "q"), 0, "moved=1", "")
	want(t, c.run("stats", "q"), 0, "ready=1", "")
}

// idem-begin, idem-extend and idem-finish run one operation once; the
// owner token goes through $COORDCTL_TOKEN.
func TestIdempotencyCommands(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	r := c.run("idem-begin", "charge-7", "sha256:1f2e", "--ttl", "30s")
	tok := regexp.MustCompile(`^execute owner_token=(\S+)`).FindStringSubmatch(r.stdout)
	if tok == nil {
		t.Fatalf("idem-begin: %v", r)
	}
	want(t, c.run("idem-begin", "charge-7", "sha256:1f2e"), 0, "in_progress", "")
	want(t, c.run("idem-finish", "charge-7", "ok"), 2, "", "needs a token")
	c.env = []string{"COORDCTL_TOKEN=" + tok[1]}
	want(t, c.run("idem-extend", "charge-7", "--ttl", "1m"), 0, "extended expire_time=", "")
	want(t, c.run("idem-finish", "charge-7", "ok"), 0, "stored", "")
	want(t, c.run("idem-begin", "charge-7", "sha256:1f2e"), 0, `completed result="ok"`, "")
	want(t, c.run("idem-begin", "charge-7", "sha256:other"), 1, "", "FINGERPRINT_MISMATCH")
	c.stdin = "from stdin"
	r = c.run("idem-begin", "k2", "fp")
	c.env = []string{"COORDCTL_TOKEN=" + regexp.MustCompile(`owner_token=(\S+)`).FindStringSubmatch(r.stdout)[1]}
	want(t, c.run("idem-finish", "k2", "-"), 0, "stored", "")
	if r := c.run("idem-begin", "k2", "fp"); !strings.Contains(r.stdout, `"from stdin"`) {
		t.Errorf("idem-begin after a finish from stdin: %v", r)
	}
}
