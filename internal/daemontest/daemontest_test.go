package daemontest_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m, false, nil) }

// TestStartConfigRestart starts a daemon from a config file's content,
// restarts it on the same addresses, and stops it.
func TestStartConfigRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	d := daemontest.Start(t, daemontest.Options{Name: "cfg", Config: "ratelimit:\n  policies:\n    - name: p\n      algorithm: fixed_window\n      limit: 1\n      period: 1h\n", WaitServing: true})
	if d.GRPCAddr == "" || d.HTTPAddr == "" || d.GRPCAddr == d.HTTPAddr {
		t.Fatalf("addresses %q and %q; want two, from the serving line", d.GRPCAddr, d.HTTPAddr)
	}
	d2 := d.Restart(t, "cfg (restarted)")
	if d2.GRPCAddr != d.GRPCAddr || d2.HTTPAddr != d.HTTPAddr {
		t.Errorf("restarted on %s and %s, want the same %s and %s", d2.GRPCAddr, d2.HTTPAddr, d.GRPCAddr, d.HTTPAddr)
	}
	conn, err := grpc.NewClient(d2.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The config file's policy is in effect.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := coordv1.NewRateLimitServiceClient(conn).Allow(ctx, &coordv1.AllowRequest{Key: "k", Policy: "p"}); err != nil || r.GetLimit() != 1 {
		t.Errorf("Allow with the config's policy p = %v, %v; want its limit 1", r, err)
	}
	if err := daemontest.WaitServing(conn, 0, nil); err == nil {
		t.Errorf("WaitServing within 0 = nil, want a timeout")
	}
	d2.Stop(t)
	select {
	case <-d2.Exited():
	default:
		t.Errorf("the daemon still runs after Stop")
	}
}
