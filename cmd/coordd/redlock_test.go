package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/daemontest"
	"github.com/coordd/coordd/internal/redistest"
)

// TestBinaryRedlock: coordd with redis.mode redlock on 3 masters says at
// start what it serves, grants fenced locks, answers every other service
// FAILED_PRECONDITION REDLOCK_MODE, and lists on /healthz a master that
// restarted; with 2 masters it refuses to start, saying why.
func TestBinaryRedlock(t *testing.T) {
	ms := []*redistest.Server{redistest.StartStandalone(t), redistest.StartStandalone(t), redistest.StartStandalone(t)}
	addrs := ms[0].Addr() + "," + ms[1].Addr() + "," + ms[2].Addr()
	bad := exec.Command(daemontest.Binary(t), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	bad.Env = append(bad.Environ(), "COORDD_STORE=redis", "COORDD_REDIS_MODE=redlock", "COORDD_REDIS_ADDRS="+ms[0].Addr()+","+ms[1].Addr())
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "at least 3") {
		t.Fatalf("coordd on 2 redlock masters: %v; want a refusal saying at least 3:\n%s", err, out)
	}

	p := daemontest.Start(t, daemontest.Options{Env: []string{"COORDD_STORE=redis", "COORDD_REDIS_MODE=redlock", "COORDD_REDIS_ADDRS=" + addrs,
		"COORDD_LOCK_MAX_TTL=5s", "COORDD_LOCK_DEFAULT_TTL=5s"}, WaitServing: true, KillAtEnd: true})
	if !strings.Contains(p.Output(), "serving LockService only") {
		t.Errorf("the start does not say what it serves:\n%s", p.Output())
	}
	conn := dial(t, p.GRPCAddr)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	locks := coordv1.NewLockServiceClient(conn)
	g, err := locks.Lock(ctx, &coordv1.LockRequest{Name: "x", Ttl: durationpb.New(3 * time.Second), Owner: "a"})
	if err != nil || !g.GetAcquired() || g.GetFence() == 0 || g.GetTtl().AsDuration() >= 3*time.Second {
		t.Fatalf("Lock = %v, %v; want acquired with a fence and a validity below the ttl", g, err)
	}
	if r, err := locks.GetLock(ctx, &coordv1.GetLockRequest{Name: "x"}); err != nil || r.GetOwner() != "a" || r.GetFence() != g.GetFence() {
		t.Fatalf("GetLock = %v, %v", r, err)
	}
	_, err = locks.Lock(ctx, &coordv1.LockRequest{Name: "s", Ttl: durationpb.New(time.Second), Shared: true})
	wantCode(t, "a shared Lock", err, codes.FailedPrecondition, "REDLOCK_MODE")
	_, err = coordv1.NewRateLimitServiceClient(conn).Allow(ctx, &coordv1.AllowRequest{Key: "k",
		Limit: &coordv1.Limit{Algorithm: coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 1, Period: durationpb.New(time.Second)}})
	wantCode(t, "Allow", err, codes.FailedPrecondition, "REDLOCK_MODE")
	_, err = coordv1.NewQueueServiceClient(conn).Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("x")})
	wantCode(t, "Enqueue", err, codes.FailedPrecondition, "REDLOCK_MODE")
	if r, err := locks.Release(ctx, &coordv1.ReleaseRequest{Name: "x", Token: g.GetToken()}); err != nil || !r.GetReleased() {
		t.Fatalf("Release = %v, %v", r, err)
	}

	ms[1].Stop()
	ms[1].Start() // empty: it counts for nothing for lock.max_ttl (5s)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + p.HTTPAddr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if strings.Contains(string(body), ms[1].Addr()) && strings.Contains(string(body), "recovering") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("/healthz does not name the restarted master within 10s:\n%s", body)
		}
	}
	p.Stop(t)
}
