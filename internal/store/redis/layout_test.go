package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// layoutKeysOn returns the layout keys under prefix on each master, with
// their values.
func layoutKeysOn(t *testing.T, addrs []string, prefix string) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]map[string]string{}
	for _, a := range addrs {
		c := goredis.NewClient(redistest.Options(a))
		role, err := c.Do(ctx, "ROLE").Slice()
		if err != nil {
			t.Fatal(err)
		}
		if role[0] != "master" {
			_ = c.Close()
			continue
		}
		out[a] = map[string]string{}
		iter := c.Scan(ctx, 0, prefix+":{v:layout.*", 100).Iterator()
		for iter.Next(ctx) {
			out[a][iter.Val()] = c.Get(ctx, iter.Val()).Val()
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	return out
}

// TestLayoutVersionOnEveryMaster: opening a store writes the layout
// version on every master (standalone: the one; Cluster: each of the
// three); a store of the same version opens beside it and serves; a master
// that holds another version makes Open fail, naming the key and both
// versions.
func TestLayoutVersionOnEveryMaster(t *testing.T) {
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			addrs := redistest.Cluster(t)
			if mode == "standalone" {
				addrs = []string{redistest.Standalone(t)}
			}
			prefix := "lv" + token.New()[:10]
			cfg := Config{Addrs: addrs, Prefix: prefix, Timeout: 5 * time.Second}
			openStore(t, cfg)
			keys := layoutKeysOn(t, addrs, prefix)
			masters := 0
			for addr, kv := range keys {
				masters++
				if len(kv) == 0 {
					t.Errorf("master %s holds no layout version under %s", addr, prefix)
				}
				for k, v := range kv {
					if v != strconv.Itoa(LayoutVersion) {
						t.Errorf("%s on %s = %q, want %d", k, addr, v, LayoutVersion)
					}
				}
			}
			if want := map[string]int{"standalone": 1, "cluster": 3}[mode]; masters != want {
				t.Fatalf("%d masters, want %d", masters, want)
			}
			open := openStore(t, cfg) // the same version: it serves
			ctx := context.Background()
			if _, err := open.GetHolds(ctx, store.HoldLock, "ns:x"); err != nil {
				t.Fatalf("GetHolds on a store of the same layout = %v", err)
			}

			// Another version on one master (what a coordd of another
			// layout would have written there).
			var addr, key string
			for a, kv := range keys {
				for k := range kv {
					addr, key = a, k
				}
			}
			c := goredis.NewClient(redistest.Options(addr))
			defer c.Close()
			if err := c.Set(ctx, key, "0", 0).Err(); err != nil {
				t.Fatal(err)
			}
			_, err := Open(ctx, Config{Mode: mode, Addrs: addrs, Prefix: prefix, Timeout: 5 * time.Second})
			var lerr *LayoutError
			if !errors.As(err, &lerr) || lerr.Key != key || lerr.Found != "0" ||
				!strings.Contains(err.Error(), "stored layout version 0") || !strings.Contains(err.Error(), "version "+strconv.Itoa(LayoutVersion)) {
				t.Fatalf("Open with %s = 0 on %s: %v; want a LayoutError naming the key and both versions", key, addr, err)
			}
			t.Logf("Open refused: %v", err)
		})
	}
}
