package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redis"
)

// TestPolicyVersionsAfterRestartEmpty: a Redis that restarts without its
// data hands out no version an instance saw before (the counter starts
// again at a random base), so a poller that knew the old version sees the
// change instead of "nothing changed" (the counter started again at 1: a
// poller that had seen version 1 kept a deleted policy in force and never
// learned of the new one).
func TestPolicyVersionsAfterRestartEmpty(t *testing.T) {
	srv := redistest.StartStandalone(t)
	st, err := redis.Open(context.Background(), redis.Config{Mode: "standalone", Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	put := func(ns, name string) int64 {
		t.Helper()
		if _, err := st.PutPolicy(ctx, ns, store.StoredPolicy{Name: name, Spec: []byte("{}")}, 10); err != nil {
			t.Fatal(err)
		}
		v, _, err := st.PolicyVersions(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	seen := put("x", "lost")
	srv.Stop() // SHUTDOWN NOSAVE: the data is gone
	srv.Start()
	var v int64
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := st.PutPolicy(ctx, "y", store.StoredPolicy{Name: "new", Spec: []byte("{}")}, 10); err == nil {
			break
		} else if time.Now().After(end) {
			t.Fatalf("put after the restart: %v", err)
		}
	}
	v, nss, err := st.PolicyVersions(ctx, seen)
	if err != nil {
		t.Fatal(err)
	}
	if v == seen || nss == nil {
		t.Fatalf("after a restart without data and a new put, the version is %d, the one seen before (%d): the change is invisible", v, seen)
	}
	if _, ok := nss["x"]; ok || nss["y"] == 0 {
		t.Fatalf("namespaces after the restart: %v, want y alone", nss)
	}
}
