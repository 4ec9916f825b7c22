package redlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// BenchmarkLockRelease: one exclusive grant and its release over five
// masters, in parallel on distinct names (the store's own cost; coordbench
// redlock-lock-release measures it through gRPC against redsync).
func BenchmarkLockRelease(b *testing.B) {
	st := open(b, addrsOf(masters(b, 5)), nil)
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := "b" + strconv.FormatInt(n.Add(1)%1000, 10)
			tok := token.New()
			g, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: "o", TTL: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			if !g.Acquired {
				continue
			}
			if _, err := st.ReleaseHold(ctx, store.HoldLock, name, tok, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}
