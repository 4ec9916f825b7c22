package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/console"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redlock"
)

// TestRedlockMode: on a Redlock store (three redis-server masters of the
// test's own), every endpoint the page uses answers 200: whoami says
// Redlock mode, a lock looked up shows its holder and fence, health lists
// the masters, and every service that is not served answers not_served
// rather than an error.
func TestRedlockMode(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, redistest.StartStandalone(t).Addr())
	}
	st, err := redlock.Open(context.Background(), redlock.Config{Addrs: addrs, Timeout: time.Second, DialTimeout: time.Second,
		Prefix: "console", RestartDelay: 5 * time.Second, FenceTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, nil, st, func(o *console.Options) { o.Nodes, o.Redlock, o.Queues = st, true, nil },
		servertest.WithConfig(func(c *server.Config) {
			c.Policies = map[string]limiter.Policy{
				"api":  {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 100, Period: time.Second}},
				"open": {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 100, Period: time.Second}, OnStoreFailure: limiter.FailOpen},
			}
		}))
	g, err := coordv1.NewLockServiceClient(f.conn).Lock(context.Background(), &coordv1.LockRequest{Name: "orders", Ttl: durationpb.New(time.Minute), Owner: "worker-7"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock = %v, %v", g, err)
	}

	get := func(method, path, body string) map[string]any {
		t.Helper()
		code, text, _ := f.do(t, method, path, "", body)
		var j map[string]any
		if err := json.Unmarshal([]byte(text), &j); code != 200 || err != nil {
			t.Errorf("%s %s: %d %s; want 200 and JSON", method, path, code, text)
		}
		return j
	}
	if j := get("GET", "/ui/api/whoami", ""); j["redlock"] != true {
		t.Errorf("whoami = %v; want redlock true", j)
	}
	j := get("GET", "/ui/api/lock?name=orders", "")
	if hs, _ := j["holders"].([]any); j["held"] != true || len(hs) != 1 ||
		hs[0].(map[string]any)["owner"] != "worker-7" || hs[0].(map[string]any)["fence"] != fmt.Sprint(g.GetFence()) {
		t.Errorf("lock = %v; want held by worker-7 with fence %d", j, g.GetFence())
	}
	if j := get("GET", "/ui/api/lock?name=free", ""); j["held"] != false || j["not_served"] != nil {
		t.Errorf("a free lock = %v; want not held", j)
	}
	j = get("GET", "/ui/api/health", "")
	nodes, _ := j["nodes"].([]any)
	if len(nodes) != 3 {
		t.Errorf("health = %v; want the 3 masters", j)
	}
	for _, n := range nodes {
		if m := n.(map[string]any); m["reachable"] != true || !strings.HasPrefix(m["role"].(string), "master") {
			t.Errorf("health: node %v; want a reachable master", m)
		}
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/ui/api/queues", ""},
		{"GET", "/ui/api/queues?name=jobs", ""},
		{"GET", "/ui/api/deadletters?queue=jobs", ""},
		{"GET", "/ui/api/semaphore?name=pool", ""},
		{"GET", "/ui/api/leader?name=sched", ""},
		{"GET", "/ui/api/policies", ""},
		{"GET", "/ui/api/allow?policy=api&key=k", ""},
		{"GET", "/ui/api/allow?policy=open&key=k", ""},
		{"POST", "/ui/api/pause", `{"queue":"jobs","paused":true}`},
		{"POST", "/ui/api/redrive", `{"queue":"jobs","all":true}`},
		{"POST", "/ui/api/purge", `{"queue":"jobs","confirm":"jobs"}`},
		{"POST", "/ui/api/policy/put", `{"name":"p","limits":[{"algorithm":"fixed_window","limit":1,"period":"1s"}]}`},
		{"POST", "/ui/api/policy/delete", `{"name":"p"}`},
	} {
		if j := get(c.method, c.path, c.body); !strings.Contains(fmt.Sprint(j["not_served"]), "not served in Redlock mode") {
			t.Errorf("%s %s = %v; want not_served", c.method, c.path, j)
		}
	}
}
