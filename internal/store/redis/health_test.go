package redis

import (
	"context"
	"testing"

	"github.com/coordd/coordd/internal/redistest"
)

func TestNodeHealth(t *testing.T) {
	cases := []struct {
		name      string
		addrs     func(testing.TB) []string
		wantRoles map[string]bool
	}{
		{"standalone", func(t testing.TB) []string { return []string{redistest.Standalone(t)} }, map[string]bool{"standalone": true}},
		{"cluster", redistest.Cluster, map[string]bool{"master": true, "replica": true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addrs := c.addrs(t)
			s := openStore(t, Config{Addrs: addrs, BreakerFailures: 5})
			nodes := s.NodeHealth(context.Background())
			if len(nodes) == 0 {
				t.Fatal("no nodes")
			}
			roles := map[string]bool{}
			for _, n := range nodes {
				roles[n.Role] = true
				if !n.Reachable || n.Latency <= 0 || n.Addr == "" {
					t.Errorf("node %+v: want reachable, with a latency and an address", n)
				}
				if n.Breaker != "closed" {
					t.Errorf("node %s: breaker %q, want closed", n.Addr, n.Breaker)
				}
			}
			for r := range c.wantRoles {
				if !roles[r] {
					t.Errorf("roles %v: no %s", roles, r)
				}
			}
		})
	}
}
