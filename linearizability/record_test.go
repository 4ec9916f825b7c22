package linearizability

// Recording histories: a coordd server on loopback, and clients that call
// LockService at random and note every call's input, output, call and return
// times.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/token"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	vizDir = flag.String("linearizability.viz", "", "also write the visualizations of the histories expected not to be linearizable to this directory")
	seed   = flag.Uint64("linearizability.seed", 0, "seed of the workloads' random choices; 0: a new one, logged")
)

// ttl is every lease's: far longer than a test, so that no lock expires.
const ttl = 30 * time.Second

// never is the Return of an operation whose outcome is unknown: it may take
// effect at any time after its call.
const never = int64(1) << 62

// serve runs coordd's gRPC server on st over loopback and returns a
// LockService client of it, warmed up. st is closed when the test ends.
func serve(t testing.TB, st store.Store) coordv1.LockServiceClient {
	t.Helper()
	t.Cleanup(func() { _ = st.Close() }) // after the server stops: cleanups run last first
	locks := coordv1.NewLockServiceClient(servertest.Serve(t, st, clock.Real{}))
	warmUp(t, locks, defaultWorkload(0).clients)
	return locks
}

// memoryStore returns a new embedded store.
func memoryStore() store.Store { return memory.New(memory.Options{}) }

// clusterStore returns a Redis store on the shared Redis Cluster, under a
// key prefix of its own. It fails the test under CI if the cluster is not
// running, and skips it otherwise.
func clusterStore(t testing.TB) store.Store {
	t.Helper()
	addrs := redistest.Cluster(t)
	st, err := redis.Open(context.Background(), redis.Config{
		Mode: "cluster", Addrs: addrs, Prefix: "lin" + token.New()[:12], Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// workload is what the clients do.
type workload struct {
	clients int
	names   []string
	length  time.Duration
	// maxLength, if longer than length, lets the clients go on after length
	// until the history has every outcome (outcomes) at least minOutcomes
	// times, or maxLength has passed: on a loaded machine a few seconds may
	// not be enough for the rarer ones (a Renew that succeeds).
	maxLength time.Duration
	// effectsInCall: a call of unknown outcome took effect, if at all,
	// before it returned (see synchronous), not at any time after (never).
	effectsInCall bool
}

func defaultWorkload(length time.Duration) workload {
	return workload{clients: 16, names: []string{"lin-a", "lin-b"}, length: length}
}

// covering returns w going on up to maxLength for the outcomes it lacks.
func (w workload) covering(maxLength time.Duration) workload {
	w.maxLength = maxLength
	return w
}

// synchronous returns w for a server whose store applies every call, and
// the first try of every clean-up of an uncertain grant (lock.CleanUps),
// within the call: the memory store behind storetest.Faulty, whose faults
// fail a call before or after it is applied, and never an AbandonHold.
// There an operation of unknown outcome took effect within its call or not
// at all, so it returns when its call did: a Lock that waited and failed
// may have been granted, by a hand-off to its ticket, until its clean-up,
// which takes the ticket out of the queue before it ends the grant
// (store.Locks.AbandonLock). Left never returning, each of the hundred or
// so unknown outcomes of TestUnknownOutcomes could be placed at any later
// point, as a grant and a release at any moment the lock was free, and the
// checker's search, which grows with 2 to the number of such pairs, ran
// past its 10 s (past 2 min once) on about one history in four. (Before
// the clean-up took the ticket out, a failed waiting Lock's ticket could be
// handed the lock after the call, and histories bound to their calls were
// found illegal: 8 of 8.)
func (w workload) synchronous() workload {
	w.effectsInCall = true
	return w
}

// outcomes are the kinds of answers a workload on a correct server must
// see, as history.counts names them.
var outcomes = []string{"lock+", "lock-", "renew+", "renew-", "release+", "release-", "get"}

// minOutcomes is how many of each outcome a covering workload waits for.
const minOutcomes = 3

// history is a recorded history.
type history struct {
	ops     []porcupine.Operation
	unknown int      // operations of unknown outcome
	errs    []string // the first errors of those
	counts  map[string]int
}

func (h history) String() string {
	return fmt.Sprintf("%d operations (Lock acquired %d, not acquired %d; Renew ok %d, not held %d; Release released %d, not %d; GetLock %d; unknown outcome %d)",
		len(h.ops), h.counts["lock+"], h.counts["lock-"], h.counts["renew+"], h.counts["renew-"],
		h.counts["release+"], h.counts["release-"], h.counts["get"], h.unknown)
}

// recorder collects the operations of the clients.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	h     history
	ids   int
	// covered: the history has every outcome at least minOutcomes times.
	covered       atomic.Bool
	effectsInCall bool // workload.effectsInCall
}

// now is the time since the recording began, on the monotonic clock.
func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

// add records an operation. An operation of unknown outcome never returns,
// unless the workload is synchronous.
func (r *recorder) add(client int, in input, call int64, out output, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case out.Unknown:
		if !r.effectsInCall {
			ret = never
		}
		if in.Which == "cleanup" {
			if ret == never {
				return // folded into its Lock: state.Orphan
			}
			break // not a call of the client: the server's clean-up after a failed Lock
		}
		if in.Kind == opLock {
			in.Orphan = ret == never
		}
		r.h.unknown++
		if len(r.h.errs) < 5 {
			r.h.errs = append(r.h.errs, fmt.Sprintf("%v: %s", in.Kind, out.Err))
		}
	default:
		switch in.Kind {
		case opLock:
			r.h.counts[sign("lock", out.Acquired)]++
		case opRenew:
			r.h.counts[sign("renew", out.OK)]++
		case opRelease:
			r.h.counts[sign("release", out.Released)]++
		case opGet:
			r.h.counts["get"]++
		}
		if !r.covered.Load() && r.coveredLocked() {
			r.covered.Store(true)
		}
	}
	if out.Unknown && (in.Kind == opGet || in.Kind == opRenew) {
		// Of unknown outcome, a GetLock or a Renew is the identity in every
		// state (variant.step1): it fits anywhere and constrains nothing, so
		// the history without it is linearizable exactly when the history
		// with it is. Left in, never returning, each would double the
		// states the checker may have to search (seen: timeouts at 10 s
		// with about a hundred of them).
		return
	}
	r.h.ops = append(r.h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

func (r *recorder) coveredLocked() bool {
	for _, k := range outcomes {
		if r.h.counts[k] < minOutcomes {
			return false
		}
	}
	return true
}

// done reports whether the clients are to stop.
func (r *recorder) done(w workload) bool {
	el := time.Since(r.start)
	if el < w.length {
		return false
	}
	return el >= w.maxLength || r.covered.Load()
}

func sign(s string, ok bool) string {
	if ok {
		return s + "+"
	}
	return s + "-"
}

// nextID numbers an operation.
func (r *recorder) nextID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids++
	return r.ids
}

// record runs w against locks and returns the history.
func record(t testing.TB, locks coordv1.LockServiceClient, w workload) history {
	t.Helper()
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	if w.maxLength > w.length {
		t.Logf("workload: %d clients for %v (up to %v for missing outcomes) on %v, seed %d (-linearizability.seed)", w.clients, w.length, w.maxLength, w.names, s)
	} else {
		t.Logf("workload: %d clients for %v on %v, seed %d (-linearizability.seed)", w.clients, w.length, w.names, s)
	}
	r := &recorder{start: time.Now(), h: history{counts: map[string]int{}}, effectsInCall: w.effectsInCall}
	var wg sync.WaitGroup
	for c := range w.clients {
		wg.Go(func() {
			cl := &client{id: c, owner: fmt.Sprintf("c%02d", c), locks: locks, rec: r, w: w,
				rng: rand.New(rand.NewPCG(s, uint64(c))), own: map[string]string{}}
			cl.run()
		})
	}
	wg.Wait()
	t.Logf("recorded for %v", time.Since(r.start).Round(time.Millisecond))
	return r.h
}

// warmUp has clients callers call GetLock on a name of its own for a while,
// unrecorded, so that the connections to the server and from it to the store
// are open before the recording: the first calls are slow, and slow calls
// that overlap many others make a history hard to check.
func warmUp(t testing.TB, locks coordv1.LockServiceClient, clients int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			ctx, cancel := callCtx()
			defer cancel()
			for range 20 {
				if _, err := locks.GetLock(ctx, &coordv1.GetLockRequest{Name: "lin-warm-up"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("warm-up: %v", err)
	}
}

// client is one of the workload's clients.
type client struct {
	id    int
	owner string
	locks coordv1.LockServiceClient
	rec   *recorder
	w     workload
	rng   *rand.Rand
	own   map[string]string // name → the token the client believes holds it
	stale []string          // tokens the client held before, the latest last
}

func (c *client) run() {
	for !c.rec.done(c.w) {
		name := c.w.names[c.rng.IntN(len(c.w.names))]
		p := c.rng.IntN(100)
		if c.own[name] != "" {
			// Holding name: mostly use the token, and give the lock back
			// soon, so that it changes hands often.
			switch {
			case p < 45:
				c.release(name, "own")
			case p < 60:
				c.renew(name, "own")
			case p < 70:
				c.get(name)
			case p < 80:
				c.lock(name) // not acquired: the client holds it
			case p < 92:
				c.release(name, c.other())
			default:
				c.renew(name, c.other())
			}
			continue
		}
		switch {
		case p < 45:
			c.lock(name)
		case p < 65:
			c.release(name, c.other())
		case p < 75:
			c.renew(name, c.other())
		default:
			c.get(name)
		}
	}
}

// other says which token other than its own a Renew or Release sends: a
// stale one if the client has any (mostly), else a random one.
func (c *client) other() string {
	if len(c.stale) > 0 && c.rng.IntN(100) < 75 {
		return "stale"
	}
	return "random"
}

// token returns the token of the kind which for name.
func (c *client) token(name, which string) string {
	switch which {
	case "own":
		return c.own[name]
	case "stale":
		return c.stale[c.rng.IntN(len(c.stale))]
	}
	return token.New()
}

// lose forgets the client's token for name: it was released, or found not
// to hold the lock.
func (c *client) lose(name string) {
	if tok := c.own[name]; tok != "" {
		c.stale = append(c.stale, tok)
		if len(c.stale) > 8 {
			c.stale = c.stale[1:]
		}
		delete(c.own, name)
	}
}

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func (c *client) lock(name string) {
	in := input{Kind: opLock, Name: name, Owner: c.owner, ID: c.rec.nextID()}
	if c.rng.IntN(100) < 25 {
		in.Wait = time.Duration(1+c.rng.IntN(20)) * time.Millisecond
	}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	resp, err := c.locks.Lock(ctx, &coordv1.LockRequest{
		Name: name, Owner: c.owner, Ttl: durationpb.New(ttl), Wait: durationpb.New(in.Wait),
	})
	ret := c.rec.now()
	if err != nil {
		out := output{Unknown: true, Err: errString(err)}
		c.rec.add(c.id, in, call, out, ret)
		// The server tries to release what the failed call may have granted.
		// Wait: the failed Lock's, which tells whether the clean-up too may
		// come after the call (recorder.add).
		cleanup := input{Kind: opRelease, Name: name, Token: cleanupToken(in.ID), Which: "cleanup", ID: c.rec.nextID(), Wait: in.Wait}
		c.rec.add(c.id, cleanup, call, out, ret)
		return
	}
	out := output{Acquired: resp.GetAcquired(), Token: resp.GetToken(), Fence: resp.GetFence(), Holder: resp.GetHolder()}
	c.rec.add(c.id, in, call, out, ret)
	if out.Acquired {
		c.lose(name) // a token the client believed held is stale now (only with a broken server)
		c.own[name] = out.Token
	}
}

func (c *client) renew(name, which string) {
	tok := c.token(name, which)
	in := input{Kind: opRenew, Name: name, Token: tok, Which: which, ID: c.rec.nextID()}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	resp, err := c.locks.Renew(ctx, &coordv1.RenewRequest{Name: name, Token: tok, Ttl: durationpb.New(ttl)})
	ret := c.rec.now()
	var out output
	switch {
	case err == nil:
		out = output{OK: true, Fence: resp.GetFence()}
	case isNotHeld(err):
		out = output{OK: false}
		if which == "own" {
			c.lose(name)
		}
	default:
		out = output{Unknown: true, Err: errString(err)}
	}
	c.rec.add(c.id, in, call, out, ret)
}

func (c *client) release(name, which string) {
	tok := c.token(name, which)
	in := input{Kind: opRelease, Name: name, Token: tok, Which: which, ID: c.rec.nextID()}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	resp, err := c.locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: tok})
	ret := c.rec.now()
	out := output{Released: resp.GetReleased()}
	if err != nil {
		out = output{Unknown: true, Err: errString(err)}
	}
	c.rec.add(c.id, in, call, out, ret)
	if which == "own" {
		// Released, found not to hold, or unknown: either way the client
		// cannot count on it any more.
		c.lose(name)
	}
}

func (c *client) get(name string) {
	in := input{Kind: opGet, Name: name, ID: c.rec.nextID()}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	resp, err := c.locks.GetLock(ctx, &coordv1.GetLockRequest{Name: name})
	ret := c.rec.now()
	out := output{Held: resp.GetHeld(), Owner: resp.GetOwner(), Fence: resp.GetFence()}
	if err != nil {
		out = output{Unknown: true, Err: errString(err)}
	}
	c.rec.add(c.id, in, call, out, ret)
}

// isNotHeld reports whether err is FAILED_PRECONDITION LOCK_NOT_HELD.
func isNotHeld(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetDomain() == server.ErrorDomain && info.GetReason() == "LOCK_NOT_HELD"
		}
	}
	return false
}

func errString(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Code().String() + ": " + st.Message()
	}
	return err.Error()
}

// checkTimeout bounds every check. A check of a recorded history takes well
// under a second (with the search hints, and even without them on the
// short histories of the tests that check without); one that does not
// finish in time is a failure, never a pass (TestTimeoutIsAFailure).
var checkTimeout = 10 * time.Second

// check checks ops against m, wants want (Ok or Illegal), and returns how
// long the check took; label names the check in logs and file names. On any
// other result, a timeout included, it writes the visualization to a
// temporary file and fails the test naming it; on want Illegal it writes it
// to -linearizability.viz, if set.
func check(t testing.TB, label string, m porcupine.Model, ops []porcupine.Operation, want porcupine.CheckResult) time.Duration {
	t.Helper()
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(m, ops, checkTimeout)
	took := time.Since(start)
	verdict := string(res)
	if res == porcupine.Unknown {
		verdict = fmt.Sprintf("Unknown (timed out after %v)", checkTimeout)
		t.Logf("check (%s): %s (%d operations)", label, verdict, len(ops))
	} else {
		t.Logf("check (%s): %s in %v (%d operations)", label, verdict, took.Round(time.Millisecond), len(ops))
	}
	if res == want && (want != porcupine.Illegal || *vizDir == "") {
		return took
	}
	// Check again for the visualization (CheckOperationsTimeout stops at the
	// first partition found illegal; the verbose check goes on with the
	// others to describe them all).
	_, info := porcupine.CheckOperationsVerbose(m, ops, checkTimeout)
	if res == want {
		if err := os.MkdirAll(*vizDir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(*vizDir, sanitize(t.Name()+"-"+label)+".html")
		if err := porcupine.VisualizePath(m, info, path); err != nil {
			t.Fatal(err)
		}
		t.Logf("visualization: %s", path)
		return took
	}
	f, err := os.CreateTemp("", "coordd-linearizability-"+sanitize(t.Name()+"-"+label)+"-*.html")
	if err == nil {
		err = errors.Join(porcupine.Visualize(m, info, f), f.Close())
	}
	if err != nil {
		t.Fatalf("check (%s): got %s, want %s; and no visualization: %v", label, verdict, want, err)
	}
	t.Errorf("check (%s): got %s, want %s; visualization: %s", label, verdict, want, f.Name())
	return took
}

func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
