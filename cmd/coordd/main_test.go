package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m, false, nil) }

// wantServices are the services a coordd must register, as reflection
// names them.
var wantServices = []string{
	"coord.v1.IdempotencyService",
	"coord.v1.LockService",
	"coord.v1.QueueService",
	"coord.v1.RateLimitService",
	"coord.v1.SessionService",
	"grpc.health.v1.Health",
}

// tlogWriter sends the daemon's log lines to the test log.
type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// inProcess is a daemon serving in this process.
type inProcess struct {
	d        *daemon
	grpcAddr string
	httpAddr string
	cancel   context.CancelFunc
	served   chan error // serve's result
}

// startInProcess builds a daemon on loopback ports chosen by the kernel and
// serves it until stop or the end of the test.
func startInProcess(t *testing.T, mutate func(*Config)) *inProcess {
	t.Helper()
	return startInProcessLogging(t, io.Discard, mutate)
}

// startInProcessLogging is startInProcess with the daemon's log also
// written to w.
func startInProcessLogging(t *testing.T, w io.Writer, mutate func(*Config)) *inProcess {
	t.Helper()
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	if mutate != nil {
		mutate(&cfg)
	}
	cfg.applyLimits()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(tlogWriter{t}, w), &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := newDaemon(cfg, log)
	if err != nil {
		t.Fatalf("newDaemon: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{
		d: d, grpcAddr: d.grpcLis.Addr().String(), httpAddr: d.httpLis.Addr().String(),
		cancel: cancel, served: make(chan error, 1),
	}
	go func() { p.served <- d.serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.served:
		case <-time.After(cfg.ShutdownTimeout + 5*time.Second):
			t.Errorf("serve did not return after its context ended")
		}
	})
	return p
}

// stop cancels serve's context and returns how long serve took to return
// and its result.
func (p *inProcess) stop(t *testing.T, within time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	p.cancel()
	select {
	case err := <-p.served:
		p.served <- err // for the cleanup
		return time.Since(start), err
	case <-time.After(within):
		t.Fatalf("serve did not return within %v of its context ending", within)
		return 0, nil
	}
}

// clients waits until p serves and returns a gRPC connection to it, an HTTP
// client, and a context for the test's calls, all ended when the test ends.
func (p *inProcess) clients(t *testing.T) (*grpc.ClientConn, *http.Client, context.Context) {
	t.Helper()
	conn := dial(t, p.grpcAddr)
	t.Cleanup(func() { _ = conn.Close() })
	hc := newHTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	waitServing(t, conn, 5*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return conn, hc, ctx
}

// dial opens a client connection; the caller closes it.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient(%s): %v", addr, err)
	}
	return conn
}

// newHTTPClient returns a client that keeps no idle connections, so that it
// leaves no goroutines behind.
func newHTTPClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

func httpGet(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// waitServing polls the health service until it reports SERVING, failing
// the test at the deadline or when exited is closed (the daemon died).
func waitServing(t *testing.T, conn *grpc.ClientConn, deadline time.Duration, exited <-chan struct{}) {
	t.Helper()
	if err := daemontest.WaitServing(conn, deadline, exited); err != nil {
		t.Fatal(err)
	}
}

// listServices asks the reflection service for the registered services.
func listServices(t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("ServerReflectionInfo: %v", err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatalf("reflection Send: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection Recv: %v", err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("reflection CloseSend: %v", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("reflection stream after CloseSend: %v, want EOF", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names
}

func checkServices(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	got := listServices(t, conn)
	for _, want := range wantServices {
		if !slices.Contains(got, want) {
			t.Errorf("reflection lists %q; %s is missing", got, want)
		}
	}
}

// errorReason returns the reason and domain of err's ErrorInfo detail.
func errorReason(err error) (reason, domain string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason(), info.GetDomain()
		}
	}
	return "", ""
}

// TestDaemonEndToEnd runs a daemon in this process and uses every service
// through real gRPC clients, then shuts it down.
func TestDaemonEndToEnd(t *testing.T) {
	before := goleak.IgnoreCurrent()
	p := startInProcess(t, nil)
	conn := dial(t, p.grpcAddr)
	defer conn.Close()
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	waitServing(t, conn, 5*time.Second, nil)

	t.Run("reflection", func(t *testing.T) { checkServices(t, conn) })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t.Run("health", func(t *testing.T) { endToEndHealth(ctx, t, conn) })
	t.Run("LockService", func(t *testing.T) { endToEndLocks(ctx, t, conn) })
	t.Run("SessionService", func(t *testing.T) { endToEndSessions(ctx, t, conn) })
	t.Run("RateLimitService", func(t *testing.T) { endToEndRateLimit(ctx, t, conn) })
	t.Run("IdempotencyService", func(t *testing.T) { endToEndIdempotency(ctx, t, conn) })
	t.Run("QueueService", func(t *testing.T) { endToEndQueues(ctx, t, conn) })
	t.Run("http", func(t *testing.T) { endToEndHTTP(t, hc, p.httpAddr) })

	endToEndShutdown(t, p, conn, hc)

	conn.Close()
	hc.CloseIdleConnections()
	goleak.VerifyNone(t, before)
}

// endToEndHealth: every service reports SERVING.
func endToEndHealth(ctx context.Context, t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	health := healthpb.NewHealthClient(conn)
	for _, svc := range append([]string{""}, wantServices[:5]...) {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Errorf("health Check(%q): %v", svc, err)
			continue
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health Check(%q) = %v, want SERVING", svc, resp.GetStatus())
		}
	}
}

// endToEndLocks: Lock, GetLock and Release.
func endToEndLocks(ctx context.Context, t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	locks := coordv1.NewLockServiceClient(conn)
	got, err := locks.Lock(ctx, &coordv1.LockRequest{Name: "e2e", Ttl: durationpb.New(10 * time.Second), Owner: "test"})
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if !got.GetAcquired() || got.GetToken() == "" || got.GetFence() == 0 {
		t.Fatalf("Lock = %v; want acquired with a token and a fence", got)
	}
	info, err := locks.GetLock(ctx, &coordv1.GetLockRequest{Name: "e2e"})
	if err != nil || !info.GetHeld() || info.GetOwner() != "test" || info.GetFence() != got.GetFence() {
		t.Errorf("GetLock = %v, %v; want held by test with fence %d", info, err, got.GetFence())
	}
	rel, err := locks.Release(ctx, &coordv1.ReleaseRequest{Name: "e2e", Token: got.GetToken()})
	if err != nil || !rel.GetReleased() {
		t.Errorf("Release = %v, %v; want released", rel, err)
	}
}

// endToEndSessions: a KeepAlive stream opens a session and ends with a half-close.
func endToEndSessions(ctx context.Context, t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	stream, err := coordv1.NewSessionServiceClient(conn).KeepAlive(sctx)
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	if err := stream.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(5 * time.Second)}); err != nil {
		t.Fatalf("KeepAlive Send: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("KeepAlive Recv: %v", err)
	}
	if resp.GetSessionId() == "" || resp.GetTtl().AsDuration() != 5*time.Second {
		t.Errorf("KeepAlive response = %v; want a session id and ttl 5s", resp)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("CloseSend: %v", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("KeepAlive after half-close: %v, want EOF", err)
	}
}

// endToEndRateLimit: a fixed window of 1 allows once, then denies.
func endToEndRateLimit(ctx context.Context, t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	rl := coordv1.NewRateLimitServiceClient(conn)
	req := &coordv1.AllowRequest{Key: "e2e", Limit: &coordv1.Limit{
		Algorithm: coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 1, Period: durationpb.New(time.Hour),
	}}
	first, err := rl.Allow(ctx, req)
	if err != nil || !first.GetAllowed() || first.GetLimit() != 1 {
		t.Fatalf("first Allow = %v, %v; want allowed with limit 1", first, err)
	}
	second, err := rl.Allow(ctx, req)
	if err != nil || second.GetAllowed() || second.GetRetryAfter().AsDuration() <= 0 {
		t.Errorf("second Allow = %v, %v; want denied with a retry_after", second, err)
	}
}

// endToEndIdempotency: EXECUTE, Finish, then COMPLETED with the result.
func endToEndIdempotency(ctx context.Context, t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	idem := coordv1.NewIdempotencyServiceClient(conn)
	begin, err := idem.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: "e2e", Fingerprint: "f1"})
	if err != nil || begin.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE || begin.GetOwnerToken() == "" {
		t.Fatalf("BeginIdempotent = %v, %v; want EXECUTE with an owner token", begin, err)
	}
	fin, err := idem.Finish(ctx, &coordv1.FinishRequest{Key: "e2e", OwnerToken: begin.GetOwnerToken(), Result: []byte("done")})
	if err != nil || !fin.GetStored() {
		t.Fatalf("Finish = %v, %v; want stored", fin, err)
	}
	again, err := idem.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: "e2e", Fingerprint: "f1"})
	if err != nil || again.GetOutcome() != coordv1.Outcome_OUTCOME_COMPLETED || string(again.GetResult()) != "done" {
		t.Errorf("BeginIdempotent again = %v, %v; want COMPLETED with the result", again, err)
	}
}

// endToEndQueues: Enqueue, Claim and Ack of one message.
func endToEndQueues(ctx context.Context, t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	q := coordv1.NewQueueServiceClient(conn)
	enq, err := q.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "e2e", Payload: []byte("hello")})
	if err != nil || enq.GetMessageId() == "" {
		t.Fatalf("Enqueue = %v, %v; want a message id", enq, err)
	}
	claim, err := q.Claim(ctx, &coordv1.ClaimRequest{Queue: "e2e", MaxMessages: 1})
	if err != nil || len(claim.GetMessages()) != 1 {
		t.Fatalf("Claim = %v, %v; want one message", claim, err)
	}
	m := claim.GetMessages()[0]
	if m.GetMessageId() != enq.GetMessageId() || string(m.GetPayload()) != "hello" || m.GetAttempt() != 1 {
		t.Errorf("claimed %v; want message %s with payload hello, attempt 1", m, enq.GetMessageId())
	}
	ack, err := q.Ack(ctx, &coordv1.AckRequest{Queue: "e2e", Receipt: m.GetReceipt()})
	if err != nil || !ack.GetAcked() {
		t.Errorf("Ack = %v, %v; want acked", ack, err)
	}
}

// endToEndHTTP: /healthz answers 200, /metrics has the gRPC server metrics
// of the calls made.
func endToEndHTTP(t *testing.T, hc *http.Client, httpAddr string) {
	t.Helper()
	// Headers past the bound (64 KiB, and the 4 KiB net/http adds) are
	// refused.
	req, err := http.NewRequest("GET", "http://"+httpAddr+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("x", 70<<10))
	if resp, err := hc.Do(req); err != nil {
		t.Errorf("GET /healthz with 70 KiB of headers: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("GET /healthz with 70 KiB of headers = %d, want 431", resp.StatusCode)
		}
	}
	if code, body := httpGet(t, hc, "http://"+httpAddr+"/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz = %d %q, want 200", code, body)
	}
	code, body := httpGet(t, hc, "http://"+httpAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", code)
	}
	for _, want := range []string{
		"grpc_server_handled_total",
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Lock",grpc_service="coord.v1.LockService",grpc_type="unary"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics does not contain %s", want)
		}
	}
}

// endToEndShutdown stops serve and checks that it returns nil, and that the
// daemon then answers neither HTTP (or 503) nor gRPC.
func endToEndShutdown(t *testing.T, p *inProcess, conn *grpc.ClientConn, hc *http.Client) {
	t.Helper()
	took, err := p.stop(t, 5*time.Second)
	if err != nil {
		t.Errorf("serve = %v after its context ended, want nil", err)
	}
	t.Logf("serve returned %v after cancel", took)

	if resp, err := hc.Get("http://" + p.httpAddr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("GET /healthz after shutdown = %d, want refused or 503", resp.StatusCode)
		}
	}
	rpcCtx, rpcCancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rpcCancel()
	if _, err := healthpb.NewHealthClient(conn).Check(rpcCtx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("health Check after shutdown = %v, want UNAVAILABLE", err)
	}

}

// TestGracefulShutdown checks that a session stream, an election observer
// and a long-poll do not hold up shutdown: the streams end with
// UNAVAILABLE/SHUTTING_DOWN and the Claim returns OK with nothing.
func TestGracefulShutdown(t *testing.T) {
	const shutdownTimeout = 20 * time.Second
	p := startInProcess(t, func(c *Config) { c.ShutdownTimeout = shutdownTimeout })
	conn := dial(t, p.grpcAddr)
	defer conn.Close()
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	waitServing(t, conn, 5*time.Second, nil)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stream, err := coordv1.NewSessionServiceClient(conn).KeepAlive(ctx)
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	if err := stream.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(30 * time.Second)}); err != nil {
		t.Fatalf("KeepAlive Send: %v", err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("KeepAlive Recv: %v", err)
	}
	// An election observer, another long stream.
	observer, err := coordv1.NewElectionServiceClient(conn).Observe(ctx, &coordv1.ObserveRequest{Name: "e"})
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	if _, err := observer.Recv(); err != nil {
		t.Fatalf("Observe Recv: %v", err)
	}

	type claimResult struct {
		resp *coordv1.ClaimResponse
		err  error
		took time.Duration
	}
	claimed := make(chan claimResult, 1)
	go func() {
		start := time.Now()
		resp, err := coordv1.NewQueueServiceClient(conn).Claim(ctx, &coordv1.ClaimRequest{
			Queue: "empty", MaxMessages: 1, Wait: durationpb.New(30 * time.Second),
		})
		claimed <- claimResult{resp, err, time.Since(start)}
	}()

	// The Claim is in flight once the server has counted it as started.
	started := `grpc_server_started_total{grpc_method="Claim",grpc_service="coord.v1.QueueService",grpc_type="unary"} 1`
	for end := time.Now().Add(5 * time.Second); ; {
		_, body := httpGet(t, hc, "http://"+p.httpAddr+"/metrics")
		if strings.Contains(body, started) {
			break
		}
		select {
		case r := <-claimed:
			t.Fatalf("Claim returned before shutdown: %v, %v", r.resp, r.err)
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("the Claim did not start within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	took, err := p.stop(t, shutdownTimeout+5*time.Second)
	if err != nil {
		t.Errorf("serve = %v, want nil", err)
	}
	if took > 3*time.Second {
		t.Errorf("serve took %v to return; want well under shutdown_timeout (%v)", took, shutdownTimeout)
	}

	select {
	case r := <-claimed:
		if r.err != nil {
			t.Errorf("Claim during shutdown = %v, want OK with no messages", r.err)
		} else if n := len(r.resp.GetMessages()); n != 0 {
			t.Errorf("Claim during shutdown returned %d messages, want 0", n)
		}
		if r.took > 10*time.Second {
			t.Errorf("Claim took %v; shutdown should end its wait", r.took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Claim still waiting 5s after serve returned")
	}

	_, err = stream.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("KeepAlive stream ended with %v, want UNAVAILABLE", err)
	}
	if reason, domain := errorReason(err); reason != "SHUTTING_DOWN" || domain != "coordd" {
		t.Errorf("KeepAlive stream's ErrorInfo = reason %q domain %q, want SHUTTING_DOWN in coordd", reason, domain)
	}
	_, err = observer.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Observe stream ended with %v, want UNAVAILABLE", err)
	}
	if reason, domain := errorReason(err); reason != "SHUTTING_DOWN" || domain != "coordd" {
		t.Errorf("Observe stream's ErrorInfo = reason %q domain %q, want SHUTTING_DOWN in coordd", reason, domain)
	}
}

// lockedBuffer collects a process's output, or a log, while the test
// reads it.
type lockedBuffer = daemontest.Buffer

// startBinary starts the coordd binary (daemontest) with args, on loopback
// ports the kernel chooses unless defaultAddrs. The process is killed at
// the end of the test if still running; Stop gives it 5s to exit 0 after
// SIGTERM.
func startBinary(t *testing.T, defaultAddrs bool, args ...string) *daemontest.Daemon {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	return daemontest.Start(t, daemontest.Options{Args: args, DefaultAddrs: defaultAddrs, KillAtEnd: true, StopTimeout: 5 * time.Second})
}

// TestBinaryServesDefaults is "go run ./cmd/coordd serves on 127.0.0.1:7070":
// the binary with no flags and no config serves gRPC on 127.0.0.1:7070 and
// metrics on 127.0.0.1:7071, and exits 0 on SIGTERM.
func TestBinaryServesDefaults(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:7070", "127.0.0.1:7071"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is already in use, so this test cannot check that coordd serves there by default; "+
				"stop whatever is listening on it (another coordd?) and run again: %v", addr, err)
		}
		l.Close()
	}
	p := startBinary(t, true)

	conn := dial(t, "127.0.0.1:7070")
	defer conn.Close()
	waitServing(t, conn, 10*time.Second, p.Exited())
	checkServices(t, conn)

	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	code, body := httpGet(t, hc, "http://127.0.0.1:7071/metrics")
	if code != http.StatusOK || !strings.Contains(body, "grpc_server_handled_total") {
		t.Errorf("GET /metrics = %d; want 200 with grpc_server_handled_total", code)
	}
	if code, _ := httpGet(t, hc, "http://127.0.0.1:7071/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz = %d, want 200", code)
	}

	p.Stop(t)
	if out := p.Output(); !strings.Contains(out, "coordd stopped") {
		t.Errorf("coordd did not log a clean stop:\n%s", out)
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestBinaryReloadsPoliciesOnSIGHUP changes a policy's limit in the file and
// sends SIGHUP; then breaks the file twice and checks that the daemon keeps
// the last good policies.
func TestBinaryReloadsPoliciesOnSIGHUP(t *testing.T) {
	policyYAML := func(algorithm string, limit int) string {
		return fmt.Sprintf("ratelimit:\n  policies:\n    - name: p\n      algorithm: %s\n      limit: %d\n      period: 1h\n", algorithm, limit)
	}
	path := filepath.Join(t.TempDir(), "coordd.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(policyYAML("fixed_window", 1))

	p := startBinary(t, false, "--config", path)
	conn := dial(t, p.GRPCAddr)
	defer conn.Close()
	waitServing(t, conn, 10*time.Second, p.Exited())

	rl := coordv1.NewRateLimitServiceClient(conn)
	allow := func(key string) *coordv1.AllowResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rl.Allow(ctx, &coordv1.AllowRequest{Key: key, Policy: "p"})
		if err != nil {
			t.Fatalf("Allow(%s, policy p): %v", key, err)
		}
		return resp
	}

	if r := allow("k0"); !r.GetAllowed() || r.GetLimit() != 1 {
		t.Fatalf("first Allow = %v; want allowed with limit 1", r)
	}
	if r := allow("k0"); r.GetAllowed() {
		t.Fatalf("second Allow = %v; want denied by limit 1", r)
	}

	// Raise the limit to 3 and reload.
	write(policyYAML("fixed_window", 3))
	p.Signal(t, syscall.SIGHUP)
	var key string
	for i, end := 1, time.Now().Add(5*time.Second); ; i++ {
		key = fmt.Sprintf("k%d", i)
		if r := allow(key); r.GetLimit() == 3 {
			if !r.GetAllowed() {
				t.Fatalf("Allow on a fresh key after reload = %v; want allowed", r)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("limit 3 not in effect 5s after SIGHUP")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 2; i <= 3; i++ {
		if r := allow(key); !r.GetAllowed() {
			t.Errorf("Allow #%d on %s after reload = %v; want allowed under limit 3", i, key, r)
		}
	}
	if r := allow(key); r.GetAllowed() {
		t.Errorf("Allow #4 on %s after reload = %v; want denied by limit 3", key, r)
	}
	p.WaitLog(t, "reloaded rate-limit policies", 1, 5*time.Second)

	// Broken files are logged and ignored.
	broken := []struct{ name, content string }{
		{"invalid YAML", "ratelimit:\n  policies: [unclosed\n"},
		{"unknown algorithm", policyYAML("quadratic", 10)},
		{"limit 0", policyYAML("fixed_window", 0)},
	}
	for i, b := range broken {
		write(b.content)
		p.Signal(t, syscall.SIGHUP)
		p.WaitLog(t, "reload failed", i+1, 5*time.Second)
		r := allow(fmt.Sprintf("broken%d", i))
		if !r.GetAllowed() || r.GetLimit() != 3 {
			t.Errorf("after a reload of a file with %s: Allow = %v; want allowed with the running limit 3", b.name, r)
		}
	}
	if strings.Count(p.Output(), "reloaded rate-limit policies") != 1 {
		t.Errorf("a broken file was reported as reloaded:\n%s", p.Output())
	}
	waitServing(t, conn, 2*time.Second, p.Exited())

	p.Stop(t)
}

// newDaemon's errors must not leave anything running: the store's sweep,
// listeners.
func TestNewDaemonErrorReleasesResources(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"grpc_addr in use", func(c *Config) { c.GRPCAddr = taken.Addr().String() }, "grpc_addr"},
		{"http_addr in use", func(c *Config) { c.HTTPAddr = taken.Addr().String() }, "http_addr"},
		{"invalid policy", func(c *Config) {
			c.RateLimit.Policies = []PolicyConfig{{Name: "p", Algorithm: "quadratic", Limit: 1, Period: time.Second}}
		}, "ratelimit.policies.p.algorithm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			cfg := DefaultConfig()
			cfg.GRPCAddr, cfg.HTTPAddr = freeAddr(t), freeAddr(t)
			tt.mutate(&cfg)
			cfg.applyLimits()
			d, err := newDaemon(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				d.store.Close()
				d.grpcLis.Close()
				d.httpLis.Close()
				t.Fatalf("newDaemon = nil error, want one naming %s", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("newDaemon = %v, want an error naming %s", err, tt.want)
			}
			// The gRPC address must be free again.
			if cfg.GRPCAddr != taken.Addr().String() {
				l, err := net.Listen("tcp", cfg.GRPCAddr)
				if err != nil {
					t.Errorf("after newDaemon failed, grpc_addr %s is still held: %v", cfg.GRPCAddr, err)
				} else {
					l.Close()
				}
			}
			if err := goleak.Find(before); err != nil {
				t.Errorf("newDaemon failed but left goroutines running: %v", err)
			}
		})
	}
}

// TestBinaryVersionAndUnknownEnv: --version prints the build and exits 0
// without serving; a COORDD_* variable that names no key is logged at warn
// by name (never by value) and otherwise ignored.
func TestBinaryVersionAndUnknownEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	out, err := exec.Command(daemontest.Binary(t), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("coordd --version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "coordd ") || !strings.Contains(string(out), "(revision ") {
		t.Fatalf("coordd --version = %q", out)
	}
	d := daemontest.Start(t, daemontest.Options{Args: []string{"--store", "memory"}, Env: []string{"COORDD_QUEUE_MAX_DELAYY=secret-looking-value"}, KillAtEnd: true})
	d.WaitLog(t, "COORDD_QUEUE_MAX_DELAYY", 1, 5*time.Second)
	if strings.Contains(d.Output(), "secret-looking-value") {
		t.Fatalf("the variable's value was logged:\n%s", d.Output())
	}
}

// TestHTTPServerBounds: the HTTP port bounds how long a client may take to
// send a request or read a response, how long an idle connection stays,
// and how large its headers may be (the README's numbers).
func TestHTTPServerBounds(t *testing.T) {
	s := newHTTPServer(http.NotFoundHandler())
	for _, c := range []struct {
		what      string
		got, want time.Duration
	}{
		{"ReadHeaderTimeout", s.ReadHeaderTimeout, 10 * time.Second},
		{"ReadTimeout", s.ReadTimeout, 30 * time.Second},
		{"WriteTimeout", s.WriteTimeout, time.Minute},
		{"IdleTimeout", s.IdleTimeout, 2 * time.Minute},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if s.MaxHeaderBytes != 64<<10 {
		t.Errorf("MaxHeaderBytes = %d, want 64 KiB", s.MaxHeaderBytes)
	}
}
