package failover

// Real coordd processes, for TestCoorddRestart and TestReplicationLoss
// (daemontest): the binary is built once, in the background while the
// other tests run (TestMain), with -race when the tests run with it.

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/internal/daemontest"
)

// startDaemon runs coordd with --store redis in cluster mode on addrs, on
// loopback ports the kernel chooses, and waits until its health service
// reports SERVING. At the end of the test it is sent SIGTERM and must exit
// 0 (unless the test killed it).
func startDaemon(t *testing.T, name string, addrs []string, env ...string) *daemontest.Daemon {
	t.Helper()
	return startDaemonMode(t, name, "cluster", addrs, env...)
}

// startDaemonMode is startDaemon with redis.mode mode ("cluster",
// "standalone").
func startDaemonMode(t *testing.T, name, mode string, addrs []string, env ...string) *daemontest.Daemon {
	t.Helper()
	return daemontest.Start(t, daemontest.Options{
		Name: name,
		Args: []string{"--store", "redis"},
		Env: append([]string{
			"COORDD_REDIS_MODE=" + mode,
			"COORDD_REDIS_ADDRS=" + strings.Join(addrs, ","),
		}, env...),
		WaitServing:  true,
		StartTimeout: 20 * time.Second,
		LogLines:     60,
	})
}

// dial opens a client connection that ends with the test.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient(%s): %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
