package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// TestBinarySIGHUPKeepsConnections: next to TestBinaryReloadsPoliciesOnSIGHUP,
// a reload that changes the API keys (in the file and in auth.api_keys_file)
// and a policy: a gRPC connection and a KeepAlive stream opened before the
// SIGHUP go on after it; a removed key is refused and an added one works,
// on that same connection; the stream of the removed key ends with
// UNAUTHENTICATED within a second of the reload, its session left to its
// TTL; a broken file changes nothing.
func TestBinarySIGHUPKeepsConnections(t *testing.T) {
	const (
		oldKey  = "old-key-of-team-0123456789"
		keptKey = "kept-key-of-team-0123456789"
		newKey  = "new-key-of-team-0123456789" // arrives in auth.api_keys_file
	)
	sum := sha256.Sum256([]byte(keptKey))
	keptSHA := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	path, keysPath := filepath.Join(dir, "coordd.yaml"), filepath.Join(dir, "keys.yaml")
	write := func(p, content string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := func(keys string, limit int) string {
		return fmt.Sprintf("auth:\n  enabled: true\n  api_keys_file: %s\n  api_keys:\n%s"+
			"ratelimit:\n  policies:\n    - name: p\n      algorithm: fixed_window\n      limit: %d\n      period: 1h\n",
			keysPath, keys, limit)
	}
	write(keysPath, "[]\n")
	write(path, config(
		"    - namespace: team\n      key: "+oldKey+"\n"+
			"    - namespace: team\n      key_sha256: "+keptSHA+"\n", 1))

	p := startBinary(t, false, "--config", path)
	conn := dial(t, p.GRPCAddr)
	defer conn.Close()
	waitServing(t, conn, 10*time.Second, p.Exited())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	locks := coordv1.NewLockServiceClient(conn)
	rl := coordv1.NewRateLimitServiceClient(conn)
	as := func(key string) context.Context { return bearerCtx(ctx, key) }

	g, err := locks.Lock(as(keptKey), &coordv1.LockRequest{Name: "held-across-reload", Ttl: durationpb.New(time.Minute), Owner: "team"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock before the reload = %v, %v", g, err)
	}
	if _, err := locks.GetLock(as(oldKey), &coordv1.GetLockRequest{Name: "held-across-reload"}); err != nil {
		t.Fatalf("the old key before the reload: %v", err)
	}
	_, err = locks.GetLock(as(newKey), &coordv1.GetLockRequest{Name: "held-across-reload"})
	wantCode(t, "the new key before the reload", err, codes.Unauthenticated, "UNAUTHENTICATED")

	sctx, scancel := context.WithCancel(as(keptKey))
	defer scancel()
	stream, err := coordv1.NewSessionServiceClient(conn).KeepAlive(sctx)
	if err != nil {
		t.Fatal(err)
	}
	beat := func(what string) *coordv1.KeepAliveResponse {
		t.Helper()
		if err := stream.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(30 * time.Second)}); err != nil {
			t.Fatalf("%s: KeepAlive Send: %v", what, err)
		}
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("%s: KeepAlive Recv: %v", what, err)
		}
		return r
	}
	id := beat("before the reload").GetSessionId()
	// A stream of the key the reload removes.
	octx, ocancel := context.WithCancel(as(oldKey))
	defer ocancel()
	old, err := coordv1.NewSessionServiceClient(conn).KeepAlive(octx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Recv(); err != nil {
		t.Fatalf("the old key's stream before the reload: %v", err)
	}
	oldEnd := make(chan error, 1)
	go func() {
		_, err := old.Recv()
		oldEnd <- err
	}()
	if r, err := rl.Allow(as(keptKey), &coordv1.AllowRequest{Key: "k0", Policy: "p"}); err != nil || r.GetLimit() != 1 {
		t.Fatalf("Allow(policy p) before the reload = %v, %v; want limit 1", r, err)
	}

	// The reload: the old key goes, the new one comes from the keys file,
	// the policy's limit goes to 3.
	write(keysPath, "- namespace: team\n  key: "+newKey+"\n")
	write(path, config("    - namespace: team\n      key_sha256: "+keptSHA+"\n", 3))
	p.Signal(t, syscall.SIGHUP)
	p.WaitLog(t, "reloaded rate-limit policies", 1, 5*time.Second)
	select {
	case err := <-oldEnd:
		wantCode(t, "the removed key's stream after the reload", err, codes.Unauthenticated, "UNAUTHENTICATED")
	case <-time.After(time.Second):
		t.Fatal("the removed key's stream was still open a second after the reload")
	}

	if r := beat("after the reload"); r.GetSessionId() != id || r.GetExpired() {
		t.Fatalf("heartbeat on the stream opened before the SIGHUP = %v; want session %s, alive", r, id)
	}
	_, err = locks.GetLock(as(oldKey), &coordv1.GetLockRequest{Name: "held-across-reload"})
	wantCode(t, "the removed key after the reload", err, codes.Unauthenticated, "UNAUTHENTICATED")
	info, err := locks.GetLock(as(newKey), &coordv1.GetLockRequest{Name: "held-across-reload"})
	if err != nil || !info.GetHeld() || info.GetOwner() != "team" {
		t.Fatalf("GetLock with the key added by the reload = %v, %v; want team's lock, held", info, err)
	}
	if rel, err := locks.Release(as(newKey), &coordv1.ReleaseRequest{Name: "held-across-reload", Token: g.GetToken()}); err != nil || !rel.GetReleased() {
		t.Errorf("Release with the new key of the same namespace = %v, %v; want released", rel, err)
	}
	if r, err := rl.Allow(as(keptKey), &coordv1.AllowRequest{Key: "k1", Policy: "p"}); err != nil || r.GetLimit() != 3 {
		t.Errorf("Allow(policy p) after the reload = %v, %v; want limit 3", r, err)
	}

	// A broken keys file: the reload fails whole, keys and policy stay.
	write(keysPath, "- namespace: team\n  key: "+newKey+"\n  colour: blue\n")
	write(path, config("    - namespace: team\n      key: "+oldKey+"\n", 5))
	p.Signal(t, syscall.SIGHUP)
	p.WaitLog(t, "reload failed", 1, 5*time.Second)
	_, err = locks.GetLock(as(oldKey), &coordv1.GetLockRequest{Name: "x"})
	wantCode(t, "the old key after a failed reload that would have restored it", err, codes.Unauthenticated, "UNAUTHENTICATED")
	if _, err := locks.GetLock(as(newKey), &coordv1.GetLockRequest{Name: "x"}); err != nil {
		t.Errorf("the running new key after a failed reload: %v", err)
	}
	if r, err := rl.Allow(as(keptKey), &coordv1.AllowRequest{Key: "k2", Policy: "p"}); err != nil || r.GetLimit() != 3 {
		t.Errorf("Allow(policy p) after a failed reload = %v, %v; want the running limit 3", r, err)
	}
	if r := beat("after a failed reload"); r.GetSessionId() != id {
		t.Fatalf("heartbeat after a failed reload = %v", r)
	}

	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("KeepAlive after half-close: %v, want EOF", err)
	}
	waitServing(t, conn, 2*time.Second, p.Exited())
	p.Stop(t)
}
