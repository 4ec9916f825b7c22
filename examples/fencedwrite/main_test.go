package main

// The tests run a coordd binary built from the root module (memory store,
// loopback ports the kernel chooses) and use PostgreSQL from
// COORDD_TEST_POSTGRES, in a schema of their own that they drop after. An
// unreachable PostgreSQL skips them, or fails them when CI is set.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

const defaultPostgres = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// coorddBin is the binary TestMain built.
var coorddBin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "fencedwrite-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		// Build from the root module's directory (../.. through the
		// replace), so the daemon is built with its own go.mod and go.sum.
		root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/coordd/coordd").Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "go list -m github.com/coordd/coordd:", err)
			return 1
		}
		coorddBin = filepath.Join(dir, "coordd")
		build := exec.Command("go", "build", "-o", coorddBin, "./cmd/coordd")
		build.Dir = strings.TrimSpace(string(root))
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building coordd in %s: %v\n%s", build.Dir, err, out)
			return 1
		}
		return m.Run()
	}())
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ci reports whether CI is set to anything but "", "0" or "false".
func ci() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "0", "false":
		return false
	}
	return true
}

// postgres makes a fresh schema, dropped with everything in it at the end of
// the test, and returns a pool config whose connections use it (search_path).
func postgres(t *testing.T) *pgxpool.Config {
	t.Helper()
	dsn := os.Getenv("COORDD_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		if ci() {
			t.Fatalf("PostgreSQL (COORDD_TEST_POSTGRES=%q) is unreachable and CI requires it: %v", dsn, err)
		}
		t.Skipf("PostgreSQL (COORDD_TEST_POSTGRES=%q) is unreachable: %v", dsn, err)
	}
	schema := "fencedwrite_" + randomHex(t)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close(ctx)
		t.Fatalf("CREATE SCHEMA %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("DROP SCHEMA %s: %v", schema, err)
		}
		admin.Close(ctx)
	})
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	return cfg
}

// newPool opens a pool of cfg, with tracer if not nil, until the end of the
// test (before the schema's DROP: cleanups run last first).
func newPool(t *testing.T, cfg *pgxpool.Config, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg = cfg.Copy()
	cfg.ConnConfig.Tracer = tracer
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// lockedBuffer collects the daemon's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var servingLine = regexp.MustCompile(`msg="coordd serving" grpc=(\S+)`)

// startCoordd runs the daemon with the memory store until the end of the
// test and returns a LockService client of it.
func startCoordd(t *testing.T) coordv1.LockServiceClient {
	t.Helper()
	cmd := exec.Command(coorddBin, "--store", "memory", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORDD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "COORDD_LOG_FORMAT=text")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting coordd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("coordd output:\n%s", out)
		}
	})
	var addr string
	for end := time.Now().Add(15 * time.Second); addr == ""; {
		if m := servingLine.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(end) {
			t.Fatalf("coordd did not log that it serves within 15s:\n%s", out)
		}
		select {
		case <-exited:
			t.Fatalf("coordd exited before serving:\n%s", out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return coordv1.NewLockServiceClient(conn)
}

// setup starts coordd, makes a schema and creates in it the counter row of a
// lock with a random name.
func setup(t *testing.T) (coordv1.LockServiceClient, *pgxpool.Config, *pgxpool.Pool, string) {
	t.Helper()
	cfg := postgres(t)
	db := newPool(t, cfg, nil)
	locks := startCoordd(t)
	name := "counter-" + randomHex(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Setup(ctx, db, name); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	return locks, cfg, db, name
}

// row reads the counter row.
func row(t *testing.T, db *pgxpool.Pool, id string) (value, lastFence int64) {
	t.Helper()
	err := db.QueryRow(context.Background(), `SELECT value, last_fence FROM fenced_counter WHERE id = $1`, id).Scan(&value, &lastFence)
	if err != nil {
		t.Fatalf("reading the row: %v", err)
	}
	return value, lastFence
}

// pauser is a Work hook that stops the worker between its read and its
// write, like a GC pause, until resume is closed.
type pauser struct{ paused, resume chan struct{} }

func newPauser() *pauser { return &pauser{make(chan struct{}), make(chan struct{})} }

func (p *pauser) work() { close(p.paused); <-p.resume }

// pauseBeforeRead is a query tracer that runs p.work before the worker's
// read: a pause between the grant and the read.
type pauseBeforeRead struct{ p *pauser }

func (tr pauseBeforeRead) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "SELECT value") {
		tr.p.work()
	}
	return ctx
}

func (pauseBeforeRead) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type outcome struct {
	res Result
	err error
}

func goIncrement(ctx context.Context, w *Worker) <-chan outcome {
	c := make(chan outcome, 1)
	go func() { res, err := w.Increment(ctx); c <- outcome{res, err} }()
	return c
}

// TestConcurrentIncrements: 4 workers, 50 increments each, under one lock:
// no write is lost and none is stale.
func TestConcurrentIncrements(t *testing.T) {
	const workers, each = 4, 50
	locks, _, db, name := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var written []int64
	var maxFence uint64
	var wg sync.WaitGroup
	for i := range workers {
		w := &Worker{Locks: locks, DB: db, Lock: name, TTL: 10 * time.Second, Wait: 30 * time.Second,
			Name: fmt.Sprintf("w%d", i), Work: func() { time.Sleep(100 * time.Microsecond) }}
		wg.Go(func() {
			for n := 0; n < each; {
				res, err := w.Increment(ctx)
				if errors.Is(err, ErrNotAcquired) {
					continue
				}
				if err != nil {
					t.Errorf("%s: Increment: %v", w.Name, err)
					return
				}
				if res.Stale || !res.Released {
					t.Errorf("%s: Increment = %+v; want a fresh write and a release", w.Name, res)
				}
				mu.Lock()
				written = append(written, res.Value)
				maxFence = max(maxFence, res.Fence)
				mu.Unlock()
				n++
			}
		})
	}
	wg.Wait()

	value, lastFence := row(t, db, name)
	if value != workers*each {
		t.Errorf("counter = %d after %d×%d increments", value, workers, each)
	}
	if uint64(lastFence) != maxFence {
		t.Errorf("last_fence = %d, want the newest fence granted, %d", lastFence, maxFence)
	}
	slices.Sort(written)
	for i, v := range written {
		if v != int64(i+1) {
			t.Fatalf("the values written, sorted, are not 1..%d: #%d is %d", workers*each, i, v)
		}
	}
}

// TestStaleHolderIsFencedOut is the case fencing exists for: worker 1's
// lease ends during a pause between its read and its write; worker 2 takes
// the lock and writes; worker 1 wakes and writes with its old fence, which
// PostgreSQL rejects.
func TestStaleHolderIsFencedOut(t *testing.T) {
	locks, _, db, name := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p1 := newPauser()
	w1 := &Worker{Locks: locks, DB: db, Lock: name, TTL: 300 * time.Millisecond, Name: "w1", Work: p1.work}
	done1 := goIncrement(ctx, w1)
	<-p1.paused // w1 holds the lock, has read 0, and is "in a GC pause"

	// Lock waits until w1's lease expires.
	w2 := &Worker{Locks: locks, DB: db, Lock: name, TTL: 10 * time.Second, Wait: 10 * time.Second, Name: "w2"}
	start := time.Now()
	r2, err := w2.Increment(ctx)
	if err != nil || r2.Stale || r2.Value != 1 || !r2.Released {
		t.Fatalf("w2: Increment = %+v, %v; want a write of 1 and a release", r2, err)
	}
	t.Logf("w2 got the lock %v after w1's pause began, fence %d", time.Since(start).Round(time.Millisecond), r2.Fence)

	close(p1.resume)
	o1 := <-done1
	if o1.err != nil {
		t.Fatalf("w1: Increment: %v", o1.err)
	}
	if !o1.res.Stale {
		t.Errorf("w1: Increment = %+v; want its write with the old fence rejected as stale", o1.res)
	}
	if o1.res.Released {
		t.Errorf("w1: Release after its lease ended answered released=true")
	}
	if o1.res.Fence >= r2.Fence {
		t.Errorf("w1's fence %d is not below w2's %d", o1.res.Fence, r2.Fence)
	}
	if value, lastFence := row(t, db, name); value != 1 || uint64(lastFence) != r2.Fence {
		t.Errorf("row = value %d, last_fence %d; want w2's write: 1, %d", value, lastFence, r2.Fence)
	}
}

// TestOlderWriteBetweenReadAndWrite: worker 1's lease ends during its pause;
// worker 2 takes the lock and reads; worker 1 wakes and writes first (its
// fence is the newest that wrote yet, so last_fence < fence alone lets it
// through); worker 2's write, computed from a value that is now out of date,
// must then be rejected, or worker 1's increment would be lost.
func TestOlderWriteBetweenReadAndWrite(t *testing.T) {
	locks, _, db, name := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p1, p2 := newPauser(), newPauser()
	w1 := &Worker{Locks: locks, DB: db, Lock: name, TTL: 300 * time.Millisecond, Name: "w1", Work: p1.work}
	done1 := goIncrement(ctx, w1)
	<-p1.paused
	w2 := &Worker{Locks: locks, DB: db, Lock: name, TTL: 10 * time.Second, Wait: 10 * time.Second, Name: "w2", Work: p2.work}
	done2 := goIncrement(ctx, w2)
	<-p2.paused // w2 holds the lock (w1's lease is over) and has read 0

	close(p1.resume)
	o1 := <-done1
	close(p2.resume)
	o2 := <-done2
	if o1.err != nil || o2.err != nil {
		t.Fatalf("Increment: w1 %v, w2 %v", o1.err, o2.err)
	}
	if o1.res.Stale || o1.res.Released {
		t.Errorf("w1 = %+v; want its write accepted (no newer fence had written) and its lock already gone", o1.res)
	}
	if !o2.res.Stale || !o2.res.Released {
		t.Errorf("w2 = %+v; want its write rejected as stale (the row changed since its read) and its lock released", o2.res)
	}
	if value, lastFence := row(t, db, name); value != 1 || uint64(lastFence) != o1.res.Fence {
		t.Errorf("row = value %d, last_fence %d; want w1's write: 1, %d", value, lastFence, o1.res.Fence)
	}
}

// TestStaleHolderReadingAfterNewerWrite: worker 1's lease ends during a
// pause between its grant and its read; worker 2 takes the lock and writes;
// worker 1 then reads worker 2's row, so its write would match the row as
// read, but carries an older fence than the row's: it must be rejected
// (last_fence < fence), and last_fence must never go back.
func TestStaleHolderReadingAfterNewerWrite(t *testing.T) {
	locks, cfg, db, name := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p1 := newPauser()
	w1 := &Worker{Locks: locks, DB: newPool(t, cfg, pauseBeforeRead{p1}), Lock: name, TTL: 300 * time.Millisecond, Name: "w1"}
	done1 := goIncrement(ctx, w1)
	<-p1.paused
	w2 := &Worker{Locks: locks, DB: db, Lock: name, TTL: 10 * time.Second, Wait: 10 * time.Second, Name: "w2"}
	r2, err := w2.Increment(ctx)
	if err != nil || r2.Stale || r2.Value != 1 {
		t.Fatalf("w2: Increment = %+v, %v; want a write of 1", r2, err)
	}
	close(p1.resume)
	o1 := <-done1
	if o1.err != nil {
		t.Fatalf("w1: Increment: %v", o1.err)
	}
	if !o1.res.Stale || o1.res.Value != 2 {
		t.Errorf("w1 = %+v; want its write of 2 (it read w2's 1) rejected as stale", o1.res)
	}
	if value, lastFence := row(t, db, name); value != 1 || uint64(lastFence) != r2.Fence {
		t.Errorf("row = value %d, last_fence %d; want w2's write: 1, %d", value, lastFence, r2.Fence)
	}
}

// TestSetupConcurrently: workers starting together on a database without
// the table all succeed (a bare CREATE TABLE IF NOT EXISTS races with
// itself in PostgreSQL).
func TestSetupConcurrently(t *testing.T) {
	db := newPool(t, postgres(t), nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := Setup(context.Background(), db, "counter"); err != nil {
				t.Errorf("Setup #%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if value, lastFence := row(t, db, "counter"); value != 0 || lastFence != 0 {
		t.Errorf("row = value %d, last_fence %d; want 0, 0", value, lastFence)
	}
}
