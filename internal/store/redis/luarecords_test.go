package redis

// The records the Lua scripts write and read back — idempotency records
// (hash fields st fp own dl ex out), a queue's meta strings
// ("v1|seq|attempt|max|deliver|enqueued|receipt") and dedup entries, session
// lock-set entries. The fuzz targets of records_fuzz_test.go search the
// idempotency and queue records on the standalone server (a few hundred
// inputs a second: a round trip per call); TestLuaRecordsRandom runs with
// every go test, on the shared standalone Redis and on the Cluster, with
// random cases of its own: arbitrary bytes as keys, fingerprints, results,
// failure messages, payloads, dedup IDs and lock names, session lock-set
// entries, queued requests' tokens and owners (hand-off tickets), and
// malformed receipts sent straight to the store, past the service's
// validation. A failure logs the seed; COORDD_LUA_SEED=n repeats it.

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
)

func TestLuaRecordsRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("COORDD_LUA_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("COORDD_LUA_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (COORDD_LUA_SEED=%d repeats it)", seed, seed)
	t.Run("standalone", func(t *testing.T) {
		clk := clock.NewFake(rgT0)
		s, _, _ := rgStandalone(t, redistest.Standalone(t), clk, Config{})
		luaRecords(t, s, clk, seed)
	})
	t.Run("cluster", func(t *testing.T) {
		clk := clock.NewFake(rgT0)
		s, _ := clusterStore(t, Config{Clock: clk})
		luaRecords(t, s, clk, seed)
	})
}

// lrBytes returns n random bytes, biased to what matters to the scripts'
// string handling and to Redis' protocol: separators, pattern characters,
// NUL, CR LF, braces, invalid UTF-8.
func lrBytes(rng *rand.Rand, n int) []byte {
	const special = "|%.*+-?^$()[]{}: \x00\r\n\xff\xc3\x80\t\\\""
	b := make([]byte, n)
	for i := range b {
		if rng.IntN(3) == 0 {
			b[i] = special[rng.IntN(len(special))]
		} else {
			b[i] = byte(rng.IntN(256))
		}
	}
	return b
}

func lrString(rng *rand.Rand, max int) string { return string(lrBytes(rng, rng.IntN(max+1))) }

func luaRecords(t *testing.T, s *Store, clk *clock.Fake, seed uint64) {
	r := &luaRun{s: s, clk: clk, ctx: context.Background(), rng: rand.New(rand.NewPCG(seed, 0x10a))}
	t.Run("idempotency", r.idempotency)
	t.Run("queue", r.queue)
	t.Run("session entries", r.sessionEntries)
	t.Run("hand-off tickets", r.handoffTickets)
}

// handoffTickets: a queued plain request's ticket record (its token, owner
// and lease, any bytes) comes back unchanged in the grant a release hands
// off: the hand-off's token, and the owner GetHolds shows.
func (r *luaRun) handoffTickets(t *testing.T) {
	rng := r.rng
	const inst = "0123456789abcdef"
	for i := 0; i < 30; i++ {
		name := "ns:" + lrString(rng, 40)
		h := store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), TTL: time.Hour}
		if g, err := r.s.AcquireHold(r.ctx, h); err != nil || !g.Acquired {
			t.Fatalf("case %d: AcquireHold: %+v, %v", i, g, err)
		}
		w := store.HoldRequest{Kind: store.HoldLock, Name: name, Token: lrString(rng, 40), Owner: lrString(rng, 60),
			TTL:  time.Duration(1+rng.IntN(1000)) * time.Second,
			Wait: &store.WaitTicket{Ticket: token.New(), Instance: inst, Lease: time.Hour}}
		if g, err := r.s.AcquireHold(r.ctx, w); err != nil || !g.Queued {
			t.Fatalf("case %d: the waiting AcquireHold: %+v, %v", i, g, err)
		}
		rel, err := r.s.ReleaseHold(r.ctx, store.HoldLock, name, h.Token, inst)
		if err != nil || !rel.Released || len(rel.Handoffs) != 1 {
			t.Fatalf("case %d: ReleaseHold: %+v, %v", i, rel, err)
		}
		if ho := rel.Handoffs[0]; ho.Token != w.Token || ho.Ticket != w.Wait.Ticket || ho.Grant.TTL != w.TTL {
			t.Fatalf("case %d: hand-off %+v; want token %q, ticket %s, ttl %v", i, ho, w.Token, w.Wait.Ticket, w.TTL)
		}
		info, err := r.s.GetHolds(r.ctx, store.HoldLock, name)
		if err != nil || info.Owner != w.Owner {
			t.Fatalf("case %d: GetHolds: %+v, %v; want owner %q", i, info, err, w.Owner)
		}
		if rel, err := r.s.ReleaseHold(r.ctx, store.HoldLock, name, w.Token, inst); err != nil || !rel.Released {
			t.Fatalf("case %d: the hand-off's release: %+v, %v", i, rel, err)
		}
	}
}

// luaRun is one luaRecords: the store, its clock, and the random source
// every phase draws its cases from, in turn (so that a seed repeats them).
type luaRun struct {
	s   *Store
	clk *clock.Fake
	ctx context.Context
	rng *rand.Rand
}

// idempotency: records with random keys, fingerprints, results and failure
// messages are written and read back intact.
func (r *luaRun) idempotency(t *testing.T) {
	rng := r.rng
	for i := 0; i < 60; i++ {
		key := "ns:" + strconv.Itoa(i) + lrString(rng, 40)
		fp := lrString(rng, 60)
		fp2 := fp + string(lrBytes(rng, 1+rng.IntN(3)))
		if rng.IntN(4) == 0 {
			fp, fp2 = "", "\x00" // the empty fingerprint differs from NUL
		}
		owner := token.New()
		st, err := r.s.BeginIdempotent(r.ctx, store.BeginIdempotent{Key: key, Fingerprint: fp, OwnerToken: owner,
			ProcessingTTL: time.Second, Retention: time.Hour})
		if err != nil || st.Outcome != store.Execute || st.OwnerToken != owner {
			t.Fatalf("case %d: Begin(%q, %q) = %+v, %v", i, key, fp, st, err)
		}
		r.idemInProgress(t, i, key, fp, fp2, owner)
		r.idemFinish(t, i, key, fp, fp2, owner)
	}
}

// idemBegin is a Begin by a new owner.
func (r *luaRun) idemBegin(key, fp string) (store.IdemState, error) {
	return r.s.BeginIdempotent(r.ctx, store.BeginIdempotent{Key: key, Fingerprint: fp, OwnerToken: token.New(),
		ProcessingTTL: time.Second, Retention: time.Hour})
}

// idemInProgress: while owner holds key, another fingerprint is a
// mismatch, the same one is in progress, and only owner can extend it.
func (r *luaRun) idemInProgress(t *testing.T, i int, key, fp, fp2, owner string) {
	t.Helper()
	if _, err := r.idemBegin(key, fp2); !errors.Is(err, store.ErrFingerprintMismatch) {
		t.Fatalf("case %d: Begin with fingerprint %q after %q: %v, want a mismatch", i, fp2, fp, err)
	}
	if st, err := r.idemBegin(key, fp); err != nil || st.Outcome != store.InProgress {
		t.Fatalf("case %d: Begin again = %+v, %v; want in progress", i, st, err)
	}
	if _, err := r.s.ExtendIdempotent(r.ctx, key, lrString(r.rng, 40), time.Second); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("case %d: Extend by a stranger: %v", i, err)
	}
	if _, err := r.s.ExtendIdempotent(r.ctx, key, owner, 2*time.Second); err != nil {
		t.Fatalf("case %d: Extend: %v", i, err)
	}
}

// idemFinish finishes key with a random result, failure or retryable
// failure, and reads it back.
func (r *luaRun) idemFinish(t *testing.T, i int, key, fp, fp2, owner string) {
	t.Helper()
	rng := r.rng
	result := lrBytes(rng, rng.IntN(300))
	msg := lrString(rng, 300)
	req := store.FinishIdempotent{Key: key, OwnerToken: owner, ResultTTL: time.Hour}
	kind := rng.IntN(3)
	switch kind {
	case 0:
		req.Result = bytes.Clone(result)
	case 1:
		req.Failure = &store.Failure{Message: msg}
	default:
		req.Failure = &store.Failure{Message: msg, Retryable: true}
	}
	if err := r.s.FinishIdempotent(r.ctx, req); err != nil {
		t.Fatalf("case %d: Finish(%+v): %v", i, req, err)
	}
	r.clk.Advance(time.Millisecond)
	st, err := r.idemBegin(key, fp)
	switch {
	case err != nil:
		t.Fatalf("case %d: Begin after Finish: %v", i, err)
	case kind == 0 && (st.Outcome != store.Completed || !bytes.Equal(st.Result, result)):
		t.Fatalf("case %d: result %q read back as %+v", i, result, st)
	case kind == 1 && (st.Outcome != store.Failed || st.Failure == nil || *st.Failure != store.Failure{Message: msg}):
		t.Fatalf("case %d: failure %q read back as %+v (%+v)", i, msg, st, st.Failure)
	case kind == 2 && st.Outcome != store.Execute:
		t.Fatalf("case %d: after a retryable failure: %+v", i, st)
	}
	if _, err := r.idemBegin(key, fp2); !errors.Is(err, store.ErrFingerprintMismatch) {
		t.Fatalf("case %d: Begin with fingerprint %q after Finish: %v, want a mismatch", i, fp2, err)
	}
}

// queue: messages with random queue names, payloads and dedup IDs are
// enqueued, claimed and acked intact, and malformed receipts change
// nothing.
func (r *luaRun) queue(t *testing.T) {
	for i := 0; i < 30; i++ {
		q := "ns:" + strconv.Itoa(i) + lrString(r.rng, 30)
		n := 1 + r.rng.IntN(3)
		c := &lrQueueCase{luaRun: r, i: i, q: q, n: n}
		c.enqueue(t)
		msgs := c.claim(t, c.n)
		c.oddReceipts(t, msgs[0].Receipt)
		c.realClaims(t, msgs)
	}
}

// lrQueueCase is one case of luaRun.queue: its queue, and the messages
// enqueued on it.
type lrQueueCase struct {
	*luaRun
	i        int
	q        string
	n        int // messages
	payloads [][]byte
	ids      []string
}

// enqueue enqueues the case's n messages, the first with a random dedup ID
// or none, and that dedup ID again.
func (c *lrQueueCase) enqueue(t *testing.T) {
	t.Helper()
	i, q := c.i, c.q
	dedup := ""
	if c.rng.IntN(2) == 0 {
		dedup = "d" + lrString(c.rng, 40) // "" would mean none
	}
	for j := 0; j < c.n; j++ {
		p := lrBytes(c.rng, c.rng.IntN(200))
		d := ""
		if j == 0 {
			d = dedup
		}
		e, err := c.s.Enqueue(c.ctx, q, store.NewMessage{ID: token.New(), Payload: p, MaxAttempts: 2, DedupID: d, DedupWindow: time.Hour})
		if err != nil || e.Duplicate {
			t.Fatalf("case %d: Enqueue(%q, %q): %+v, %v", i, q, p, e, err)
		}
		c.payloads, c.ids = append(c.payloads, p), append(c.ids, e.ID)
	}
	if dedup != "" {
		e, err := c.s.Enqueue(c.ctx, q, store.NewMessage{ID: token.New(), Payload: []byte("dup"), MaxAttempts: 2, DedupID: dedup, DedupWindow: time.Hour})
		if err != nil || !e.Duplicate || e.ID != c.ids[0] {
			t.Fatalf("case %d: Enqueue with dedup ID %q again: %+v, %v; want a duplicate of %s", i, dedup, e, err, c.ids[0])
		}
	}
}

// claim claims want messages, and checks their payloads and receipts.
func (c *lrQueueCase) claim(t *testing.T, want int) []store.Message {
	t.Helper()
	i := c.i
	tokens := make([]string, 3)
	for k := range tokens {
		tokens[k] = token.New()
	}
	cl, err := c.s.Claim(c.ctx, c.q, store.Claim{Tokens: tokens, Visibility: time.Minute})
	if err != nil || len(cl.Messages) != want {
		t.Fatalf("case %d: Claim: %d messages, %v; want %d", i, len(cl.Messages), err, want)
	}
	for _, m := range cl.Messages {
		k := slices.Index(c.ids, m.ID)
		if k < 0 || !bytes.Equal(m.Payload, c.payloads[k]) {
			t.Fatalf("case %d: claimed %s with payload %q; enqueued %q as %q", i, m.ID, m.Payload, c.ids, c.payloads)
		}
		if id, _, ok := store.ParseReceipt(m.Receipt); !ok || id != m.ID {
			t.Fatalf("case %d: receipt %q of %s", i, m.Receipt, m.ID)
		}
	}
	return cl.Messages
}

// oddReceipts sends malformed and stale receipts, derived from real,
// straight to the scripts: each is a receipt whose claim is not live, never
// an error, and changes nothing.
func (c *lrQueueCase) oddReceipts(t *testing.T, real string) {
	t.Helper()
	i, q, rng := c.i, c.q, c.rng
	odd := []string{"", real[:32], real[:71], real + "|", real + "\x00", strings.ToUpper(real),
		real[:71] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", real[71])+1)%16]),
		real[:32] + "00000002" + real[40:], real[:32] + "|1|2|3|4|5|", real[:32] + "%d+" + real[35:],
		strings.Repeat("|", 72), "\xff" + real[1:]}
	for k := 0; k < 12; k++ {
		odd = append(odd, lrString(rng, 100), real[:32]+lrString(rng, 60), lrString(rng, 32)+real[32:])
	}
	for _, r := range odd {
		if r == real {
			continue
		}
		if _, err := c.s.Nack(c.ctx, q, r, 0); !errors.Is(err, store.ErrReceiptExpired) {
			t.Fatalf("case %d: Nack(%q): %v, want ErrReceiptExpired", i, r, err)
		}
		if _, err := c.s.ExtendClaim(c.ctx, q, r, time.Minute); !errors.Is(err, store.ErrReceiptExpired) {
			t.Fatalf("case %d: ExtendClaim(%q): %v, want ErrReceiptExpired", i, r, err)
		}
	}
	acked, err := c.s.Ack(c.ctx, q, odd)
	if err != nil || len(acked) != len(odd) || slices.Contains(acked, true) {
		t.Fatalf("case %d: Ack(odd receipts) = %v, %v", i, acked, err)
	}
	if st, err := c.s.Stats(c.ctx, q); err != nil || st != (store.QueueStats{InFlight: int64(c.n)}) {
		t.Fatalf("case %d: Stats after odd receipts: %+v, %v; want %d in flight", i, st, err, c.n)
	}
}

// realClaims: the real claims msgs still work, and the payloads survive a
// Nack.
func (c *lrQueueCase) realClaims(t *testing.T, msgs []store.Message) {
	t.Helper()
	i, q, n := c.i, c.q, c.n
	if _, err := c.s.ExtendClaim(c.ctx, q, msgs[0].Receipt, 2*time.Minute); err != nil {
		t.Fatalf("case %d: ExtendClaim(real): %v", i, err)
	}
	for _, m := range msgs {
		if _, err := c.s.Nack(c.ctx, q, m.Receipt, 0); err != nil {
			t.Fatalf("case %d: Nack(real): %v", i, err)
		}
	}
	again := c.claim(t, n)
	var rs []string
	for _, m := range again {
		rs = append(rs, m.Receipt)
	}
	acked, err := c.s.Ack(c.ctx, q, append(rs, rs[0]))
	if err != nil || slices.Contains(acked[:n], false) || acked[n] {
		t.Fatalf("case %d: Ack(receipts, the first again) = %v, %v", i, acked, err)
	}
}

// lrHeld is a lock bound to a session in luaRun.sessionEntries.
type lrHeld struct {
	name  string
	fence uint64
	hold  time.Duration
}

// sessionEntries: locks with random names bound to a session are recorded
// in its lock set with their names and fences: those past their max hold
// are reported lost as such, the others released with the session.
func (r *luaRun) sessionEntries(t *testing.T) {
	for i := 0; i < 20; i++ {
		sid := "ns:" + token.New()
		if _, err := r.s.CreateSession(r.ctx, sid, time.Hour, 0, 0); err != nil {
			t.Fatal(err)
		}
		locks := r.acquireLocks(t, i, sid)
		r.checkLost(t, i, sid, locks)
	}
}

// acquireLocks binds 1 to 4 locks with random names to the session sid,
// some with a max hold of 1 to 3s.
func (r *luaRun) acquireLocks(t *testing.T, i int, sid string) []lrHeld {
	t.Helper()
	rng := r.rng
	var locks []lrHeld
	for j := 0; j < 1+rng.IntN(4); j++ {
		name := "ns:" + strconv.Itoa(j) + lrString(rng, 40)
		hold := time.Duration(0)
		if rng.IntN(2) == 0 {
			hold = time.Duration(1+rng.IntN(3)) * time.Second
		}
		g, err := r.s.AcquireHold(r.ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), Owner: lrString(rng, 20),
			MaxHold: hold, SessionID: sid})
		if err != nil || !g.Acquired {
			t.Fatalf("case %d: AcquireLock(%q): %+v, %v", i, name, g, err)
		}
		locks = append(locks, lrHeld{name, g.Fence, hold})
	}
	return locks
}

// checkLost: past every max hold, the locks with one are lost, with their
// names and fences as the entries recorded them; closing the session
// releases the others.
func (r *luaRun) checkLost(t *testing.T, i int, sid string, locks []lrHeld) {
	t.Helper()
	st, err := r.s.KeepAliveSession(r.ctx, store.SessionRef{ID: sid}, 0)
	if err != nil || len(st.Lost) != 0 {
		t.Fatalf("case %d: KeepAlive: %+v, %v", i, st, err)
	}
	r.clk.Advance(4 * time.Second)
	st, err = r.s.KeepAliveSession(r.ctx, store.SessionRef{ID: sid}, 0)
	if err != nil {
		t.Fatalf("case %d: KeepAlive after the max holds: %v", i, err)
	}
	var wantLost, kept []string
	for _, l := range locks {
		if l.hold > 0 {
			wantLost = append(wantLost, l.name+"#"+strconv.FormatUint(l.fence, 10))
		} else {
			kept = append(kept, l.name)
		}
	}
	var lost []string
	for _, l := range st.Lost {
		if l.Reason != store.LostMaxHold {
			t.Fatalf("case %d: lost %+v", i, l)
		}
		lost = append(lost, l.Name+"#"+strconv.FormatUint(l.Fence, 10))
	}
	slices.Sort(lost)
	slices.Sort(wantLost)
	if !slices.Equal(lost, wantLost) {
		t.Fatalf("case %d: lost %q, want %q", i, lost, wantLost)
	}
	released, err := storetest.ReleasedNames(r.s.CloseSession(r.ctx, store.SessionRef{ID: sid}))
	slices.Sort(released)
	slices.Sort(kept)
	if err != nil || !slices.Equal(released, kept) {
		t.Fatalf("case %d: CloseSession released %q, %v; want %q", i, released, err, kept)
	}
}
