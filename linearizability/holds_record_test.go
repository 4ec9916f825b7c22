package linearizability

// Recording histories of store.Holds: clients that call a store directly
// (not through a server: the services of shared locks and semaphores are
// built apart) and note every call's input, output, call and return times.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/token"
)

// standaloneStore returns a Redis store on the shared standalone Redis,
// under a key prefix of its own; as clusterStore otherwise.
func standaloneStore(t testing.TB) store.Store {
	t.Helper()
	st, err := redis.Open(context.Background(), redis.Config{
		Mode: "standalone", Addrs: []string{redistest.Standalone(t)}, Prefix: "lin" + token.New()[:12], Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// holdsWorkload is what the clients do on names of one kind.
type holdsWorkload struct {
	kind    store.HoldKind
	clients int
	names   []string
	// maxHolders caps a lock's shared holders (0: no cap); limit is a
	// semaphore's (a few requests ask for limit-1, to meet
	// ErrLimitMismatch).
	maxHolders, limit int
	length            time.Duration
	// maxLength, if longer than length, lets the clients go on until the
	// history has every outcome (holdsOutcomes) at least minOutcomes times.
	maxLength time.Duration
	// session, if not 0, is the TTL of a session each client keeps (no
	// lock-delay): half its requests that do not wait are bound to it; it
	// is renewed every session/5, and now and then dropped, left to expire
	// while the client goes on with a new one.
	session time.Duration
}

// withSessions gives w's clients sessions of ttl.
func (w holdsWorkload) withSessions(ttl time.Duration) holdsWorkload {
	w.session = ttl
	return w
}

func sharedWorkload(length time.Duration) holdsWorkload {
	return holdsWorkload{kind: store.HoldLock, clients: 12, names: []string{"rw-a", "rw-b", "rw-c", "rw-d", "rw-e", "rw-f"}, maxHolders: 3, length: length}
}

func semaphoreWorkload(length time.Duration) holdsWorkload {
	return holdsWorkload{kind: store.HoldSemaphore, clients: 12, names: []string{"sem-a", "sem-b", "sem-c", "sem-d", "sem-e", "sem-f"}, limit: 3, length: length}
}

func (w holdsWorkload) covering(maxLength time.Duration) holdsWorkload {
	w.maxLength = maxLength
	return w
}

// holdsOutcomes are the kinds of answers a workload on a correct store
// must see, as holdsHistory.counts names them.
func (w holdsWorkload) outcomes() []string {
	o := []string{"acquire+", "acquire-", "queued", "acquire+queued", "release+", "release-", "renew+", "renew-", "get", "get+", "leave"}
	if w.session > 0 {
		o = append(o, "acquire+bound", "get+bound", "renew-bound", "expire")
	}
	if w.kind == store.HoldSemaphore {
		return append(o, "mismatch", "holders>1")
	}
	return append(o, "acquire+shared", "acquire+exclusive", "holders>1")
}

// holdsHistory is a recorded history.
type holdsHistory struct {
	ops     []porcupine.Operation
	unknown int
	errs    []string
	counts  map[string]int
}

func (h holdsHistory) String() string {
	keys := make([]string, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s %d;", k, h.counts[k])
	}
	return fmt.Sprintf("%d operations (%s unknown outcome %d)", len(h.ops), b.String(), h.unknown)
}

type holdsRecorder struct {
	start   time.Time
	w       holdsWorkload
	mu      sync.Mutex
	h       holdsHistory
	ids     int
	covered atomic.Bool
}

func (r *holdsRecorder) now() int64 { return int64(time.Since(r.start)) }

func (r *holdsRecorder) nextID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids++
	return r.ids
}

func (r *holdsRecorder) add(client int, in hin, call int64, out hout, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.Unknown {
		ret = never
		r.h.unknown++
		if len(r.h.errs) < 5 {
			r.h.errs = append(r.h.errs, fmt.Sprintf("%v: %s", in.Op, out.Err))
		}
	} else {
		c := r.h.counts
		switch in.Op {
		case hAcquire:
			switch {
			case out.Mismatch:
				c["mismatch"]++
			case out.SessionGone:
				c["session-gone"]++
			case out.Acquired:
				c["acquire+"]++
				if in.Session != "" {
					c["acquire+bound"]++
				}
				if in.Ticket != "" && in.Which == "retry" {
					c["acquire+queued"]++
				}
				if in.Kind == store.HoldLock && in.Shared {
					c["acquire+shared"]++
				} else if in.Kind == store.HoldLock {
					c["acquire+exclusive"]++
				}
				if out.Holders > 1 {
					c["holders>1"]++
				}
			case out.Queued:
				c["acquire-"]++
				c["queued"]++
			default:
				c["acquire-"]++
			}
		case hRelease:
			c[sign("release", out.Released)]++
		case hRenew:
			c[sign("renew", out.OK)]++
			if out.Bound {
				c["renew-bound"]++
			}
		case hGet:
			c["get"]++
			if len(out.Info) > 0 {
				c["get+"]++
			}
			if slices.ContainsFunc(out.Info, func(x hholder) bool { return x.Bound }) {
				c["get+bound"]++
			}
		case hExpire:
			c["expire"]++
		case hLeave:
			c["leave"]++
		}
		if !r.covered.Load() && r.coveredLocked() {
			r.covered.Store(true)
		}
	}
	r.h.ops = append(r.h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

func (r *holdsRecorder) coveredLocked() bool {
	for _, k := range r.w.outcomes() {
		if r.h.counts[k] < minOutcomes {
			return false
		}
	}
	return true
}

func (r *holdsRecorder) done() bool {
	el := time.Since(r.start)
	if el < r.w.length {
		return false
	}
	return el >= r.w.maxLength || r.covered.Load()
}

// recordHolds runs w against st and returns the history; warm, if not
// nil, is st's store without the faults or the breakage, warmed up first.
// A workload with sessions needs st to be a store.Sessions too.
func recordHolds(t testing.TB, st, warm store.Holds, w holdsWorkload) holdsHistory {
	t.Helper()
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("workload: %d clients on %v holds %v for %v (up to %v for missing outcomes), seed %d (-linearizability.seed)",
		w.clients, w.kind, w.names, w.length, max(w.length, w.maxLength), s)
	if warm != nil {
		warmUpHolds(t, warm, w)
	}
	r := &holdsRecorder{start: time.Now(), w: w, h: holdsHistory{counts: map[string]int{}}}
	var wg sync.WaitGroup
	for c := range w.clients {
		wg.Go(func() {
			cl := &hclient{id: c, owner: fmt.Sprintf("c%02d", c), instance: fmt.Sprintf("inst%02d", c), st: st, rec: r, w: w,
				rng: rand.New(rand.NewPCG(s, uint64(c))), own: map[string]string{}}
			if w.session > 0 {
				cl.sessions, cl.bound = st.(store.Sessions), map[string]bool{}
				cl.newSession()
			}
			cl.run()
		})
	}
	wg.Wait()
	t.Logf("recorded for %v", time.Since(r.start).Round(time.Millisecond))
	return r.h
}

// warmUpHolds opens the store's connections before the recording (see
// warmUp).
func warmUpHolds(t testing.TB, st store.Holds, w holdsWorkload) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, w.clients)
	for range w.clients {
		wg.Go(func() {
			ctx, cancel := callCtx()
			defer cancel()
			for range 20 {
				if _, err := st.GetHolds(ctx, w.kind, "lin-warm-up"); err != nil {
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

// hclient is one of the workload's clients. It holds at most one hold per
// name, and waits for at most one at a time.
type hclient struct {
	id       int
	owner    string
	instance string
	st       store.Holds
	rec      *holdsRecorder
	w        holdsWorkload
	rng      *rand.Rand
	own      map[string]string // name → the token the client believes holds it
	stale    []string

	sessions store.Sessions  // with w.session
	session  string          // the client's session ("": none yet)
	bound    map[string]bool // the tokens of the holds bound to it
	// renewed: the call and return of the session's last renewal (or of
	// its creation) known to have taken effect; its deadline was set
	// between them. renewedBy: the latest instant a renewal of unknown
	// outcome after it may have taken effect (0: none).
	renewed   [2]int64
	renewedBy int64
	nextRenew time.Time
}

func (c *hclient) run() {
	for !c.rec.done() {
		if c.sessions != nil {
			c.tendSession()
		}
		name := c.w.names[c.rng.IntN(len(c.w.names))]
		p := c.rng.IntN(100)
		if c.own[name] != "" {
			switch {
			case p < 45:
				c.release(name, "own")
			case p < 60:
				c.renew(name, "own")
			case p < 75:
				c.get(name)
			case p < 90:
				c.release(name, c.other())
			default:
				c.renew(name, c.other())
			}
			continue
		}
		switch {
		case p < 50:
			c.acquire(name)
		case p < 62:
			c.release(name, c.other())
		case p < 72:
			c.renew(name, c.other())
		default:
			c.get(name)
		}
	}
}

func (c *hclient) other() string {
	if len(c.stale) > 0 && c.rng.IntN(100) < 75 {
		return "stale"
	}
	return "random"
}

func (c *hclient) token(name, which string) string {
	switch which {
	case "own":
		return c.own[name]
	case "stale":
		return c.stale[c.rng.IntN(len(c.stale))]
	}
	return token.New()
}

func (c *hclient) lose(name string) {
	if tok := c.own[name]; tok != "" {
		c.stale = append(c.stale, tok)
		if len(c.stale) > 8 {
			c.stale = c.stale[1:]
		}
		delete(c.own, name)
	}
}

// acquire asks for a hold; a third of the time waiting: it then comes back
// with its ticket a few times, a little later each (as a woken waiter
// would), and leaves the queue if it is still not granted.
func (c *hclient) acquire(name string) {
	in := hin{Op: hAcquire, Kind: c.w.kind, Name: name, Owner: c.owner, Token: token.New()}
	switch c.w.kind {
	case store.HoldSemaphore:
		in.Limit = c.w.limit
		if c.rng.IntN(100) < 4 {
			in.Limit = c.w.limit - 1
		}
	default:
		in.Shared = c.rng.IntN(100) < 60
		in.MaxHolders = c.w.maxHolders
	}
	if c.rng.IntN(100) < 35 {
		in.Ticket = token.New()
	} else if c.session != "" && c.rng.IntN(100) < 50 {
		in.Session = c.session
	}
	tries := 1 + c.rng.IntN(6)
	for try := 0; ; try++ {
		in.ID = c.rec.nextID()
		if try > 0 {
			in.Which = "retry"
		}
		out, adopted := c.callAcquire(in)
		switch {
		case out.SessionGone:
			c.sessionEnded()
			return
		case out.AlreadyHeld:
			c.lose(name)
			c.own[name], c.bound[adopted] = adopted, true
			return
		case out.Acquired:
			c.lose(name)
			c.own[name] = in.Token
			if in.Session != "" {
				c.bound[in.Token] = true
			}
			return
		case out.Unknown:
			// It may have granted, or queued: undo both, until the undoing
			// is known to be done (a ticket left behind would block the
			// name for the rest of the test).
			for range 5 {
				c.own[name] = in.Token
				if c.release(name, "own") {
					break
				}
			}
			for range 5 {
				if in.Ticket == "" || c.leave(name, in.Ticket) {
					break
				}
			}
			return
		case !out.Queued || try >= tries:
			for range 5 {
				if in.Ticket == "" || c.leave(name, in.Ticket) {
					break
				}
			}
			return
		}
		time.Sleep(time.Duration(c.rng.IntN(1500)) * time.Microsecond)
	}
}

// callAcquire also returns the token of a grant AlreadyHeld.
func (c *hclient) callAcquire(in hin) (hout, string) {
	req := store.HoldRequest{
		Name: in.Name, Token: in.Token, Owner: in.Owner, TTL: ttl,
		Kind: in.Kind, Shared: in.Shared, MaxHolders: in.MaxHolders, Limit: in.Limit, SessionID: in.Session,
	}
	if in.Ticket != "" {
		req.Wait = &store.WaitTicket{Ticket: in.Ticket, Instance: c.instance, Lease: ttl}
	}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	g, err := c.st.AcquireHold(ctx, req)
	ret := c.rec.now()
	var out hout
	switch {
	case errors.Is(err, store.ErrLimitMismatch):
		out = hout{Mismatch: true}
	case errors.Is(err, store.ErrSessionNotFound):
		out = hout{SessionGone: true}
	case err != nil:
		out = hout{Unknown: true, Err: err.Error()}
	default:
		out = hout{Acquired: g.Acquired, AlreadyHeld: g.AlreadyHeld, Queued: g.Queued, Fence: g.Fence, Holder: g.Holder,
			RetryAt: !g.RetryAt.IsZero(), Holders: g.Holders, Limit: g.Limit}
	}
	c.rec.add(c.id, in, call, out, ret)
	return out, g.Token
}

// release reports whether its outcome is known.
func (c *hclient) release(name, which string) bool {
	in := hin{Op: hRelease, Kind: c.w.kind, Name: name, Token: c.token(name, which), Which: which, ID: c.rec.nextID()}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	rel, err := c.st.ReleaseHold(ctx, c.w.kind, name, in.Token, "")
	ret := c.rec.now()
	out := hout{Released: rel.Released}
	if err != nil {
		out = hout{Unknown: true, Err: err.Error()}
	}
	c.rec.add(c.id, in, call, out, ret)
	if which == "own" {
		c.lose(name)
	}
	return !out.Unknown
}

func (c *hclient) renew(name, which string) {
	in := hin{Op: hRenew, Kind: c.w.kind, Name: name, Token: c.token(name, which), Which: which, ID: c.rec.nextID()}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	l, err := c.st.RenewHold(ctx, c.w.kind, name, in.Token, ttl)
	ret := c.rec.now()
	var out hout
	switch {
	case err == nil:
		out = hout{OK: true, Fence: l.Fence}
	case errors.Is(err, store.ErrNotHeld):
		if which == "own" {
			c.lose(name)
		}
	case errors.Is(err, store.ErrSessionBound):
		out = hout{Bound: true}
	default:
		out = hout{Unknown: true, Err: err.Error()}
	}
	c.rec.add(c.id, in, call, out, ret)
}

func (c *hclient) get(name string) {
	in := hin{Op: hGet, Kind: c.w.kind, Name: name, ID: c.rec.nextID()}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	info, err := c.st.GetHolds(ctx, c.w.kind, name)
	ret := c.rec.now()
	out := hout{Waiters: info.Waiters, Limit: info.Limit, Held: info.Held, Owner: info.Owner, Fence: info.Fence}
	for _, x := range info.Holders {
		out.Info = append(out.Info, hholder{Owner: x.Owner, Fence: x.Fence, Shared: x.Shared, Bound: x.SessionBound})
	}
	if err != nil {
		out = hout{Unknown: true, Err: err.Error()}
	}
	c.rec.add(c.id, in, call, out, ret)
}

// leave reports whether its outcome is known.
func (c *hclient) leave(name, ticket string) bool {
	in := hin{Op: hLeave, Kind: c.w.kind, Name: name, Ticket: ticket, ID: c.rec.nextID()}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	_, err := c.st.LeaveQueue(ctx, c.w.kind, name, ticket, "", "")
	ret := c.rec.now()
	var out hout
	if err != nil {
		out = hout{Unknown: true, Err: err.Error()}
	}
	c.rec.add(c.id, in, call, out, ret)
	return !out.Unknown
}

// newSession starts a session for the client, trying until one is known
// to be created.
func (c *hclient) newSession() {
	for {
		id := token.New()
		ctx, cancel := callCtx()
		call := c.rec.now()
		_, err := c.sessions.CreateSession(ctx, id, c.w.session, 0, 0)
		ret := c.rec.now()
		cancel()
		if err == nil {
			c.session, c.renewed, c.renewedBy = id, [2]int64{call, ret}, 0
			c.nextRenew = time.Now().Add(c.w.session / 5)
			return
		}
	}
}

// tendSession renews the client's session when it is due, and one time
// in a hundred drops it instead.
func (c *hclient) tendSession() {
	if c.rng.IntN(100) == 0 {
		c.sessionEnded()
		return
	}
	if time.Now().Before(c.nextRenew) {
		return
	}
	ctx, cancel := callCtx()
	defer cancel()
	call := c.rec.now()
	st, err := c.sessions.KeepAliveSession(ctx, store.SessionRef{ID: c.session}, c.w.session)
	ret := c.rec.now()
	deadline, _ := ctx.Deadline()
	switch {
	case err == nil && !st.Expired:
		c.renewed, c.renewedBy = [2]int64{call, ret}, 0
		c.nextRenew = time.Now().Add(c.w.session / 5)
	case err == nil || errors.Is(err, store.ErrSessionNotFound):
		c.sessionEnded()
	default: // it may have renewed, until its deadline
		c.renewedBy = max(c.renewedBy, call+int64(time.Until(deadline)))
		c.sessionEnded()
	}
}

// sessionEnded records the expiry of the client's session, dropped or
// found expired, and starts a new one. The session expires one TTL after
// its last renewal took effect: between the call and the return of the
// last renewal known to have taken effect (or up to the end of a later
// one of unknown outcome), plus the TTL, give or take expiryMargin for the
// clocks (the store's may be Redis's; the recorder's is this process's
// monotonic clock).
func (c *hclient) sessionEnded() {
	const expiryMargin = 2 * time.Millisecond
	ttl := int64(c.w.session)
	in := hin{Op: hExpire, Session: c.session, ID: c.rec.nextID()}
	c.rec.add(c.w.clients+c.id, in, c.renewed[0]+ttl-int64(expiryMargin), hout{},
		max(c.renewed[1], c.renewedBy)+ttl+int64(expiryMargin))
	for name, tok := range c.own {
		if c.bound[tok] {
			c.lose(name)
		}
	}
	clear(c.bound)
	c.newSession()
}

// checkHolds checks a recorded history against the holds model, wanting
// want, after checking that the workload did what it is for.
func checkHolds(t *testing.T, w holdsWorkload, h holdsHistory, want porcupine.CheckResult) {
	t.Helper()
	t.Logf("history: %v", h)
	if len(h.errs) > 0 {
		t.Logf("first errors: %q", h.errs)
	}
	if want == porcupine.Ok {
		for _, k := range w.outcomes() {
			if h.counts[k] == 0 {
				t.Errorf("the workload had no %s outcome", k)
			}
		}
	}
	check(t, "holds", holdsModel(hvariant{}), h.ops, want)
}
