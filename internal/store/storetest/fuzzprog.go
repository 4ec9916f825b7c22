package storetest

// Programs for the fuzz targets of the values a backend stores: each runs
// the operations one fuzzed input describes against a backend and checks
// every answer against a model of the contract in internal/store (written
// from its documentation, independent of any backend's code). Each backend
// has its own Fuzz* targets that call them (internal/store/memory and
// internal/store/redis), so the memory store's records and the records the
// Redis scripts write (an idempotency key's hash, a queue's message and meta
// entries) are held to the same model.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
)

// IdemInput is one input of an idempotency fuzz target.
type IdemInput struct {
	// Prog is the program: steps of 4 bytes (op, a, b, c), at most 64.
	Prog []byte
	// Keys and Fingerprints are what the steps pick from (arbitrary bytes:
	// the caller adds what it needs to keep inputs apart, the same to
	// both keys so that equal keys stay equal).
	Keys, Fingerprints [2]string
	// Result and Message are what a Finish stores (or a prefix of them).
	Result  []byte
	Message string
}

// IdemProgram runs in's program of BeginIdempotent, FinishIdempotent,
// ExtendIdempotent and clock advances on s, whose time clk drives, and
// checks every answer against the model exactly: a result read back is
// byte-identical to the one stored (also after the caller reused its
// buffer), a fingerprint that differs from a live key's is
// ErrFingerprintMismatch, only the owner of a live lease may finish or
// extend it, and times are the model's to the microsecond. The keys must
// not exist in s when it starts.
func IdemProgram(t testing.TB, s store.Idempotency, clk *clock.Fake, in IdemInput) {
	t.Helper()
	ctx := context.Background()
	m := idemModel{recs: map[string]*idemModelRec{}}
	prog, result, message := in.Prog, in.Result, in.Message
	var owners []string // every owner token handed out, in order
	next := func() byte {
		if len(prog) == 0 {
			return 0
		}
		b := prog[0]
		prog = prog[1:]
		return b
	}
	// owner picks one of the owner tokens handed out so far, or one nobody
	// holds.
	owner := func(b byte) string {
		if i := int(b) % (len(owners) + 1); i < len(owners) {
			return owners[i]
		}
		return "not-an-owner"
	}
	for step := 0; len(prog) > 0 && step < 64; step++ {
		op, a, b, c := next(), next(), next(), next()
		key := in.Keys[a&1]
		now := clk.Now().Truncate(time.Microsecond)
		switch op % 4 {
		case 0:
			req := store.BeginIdempotent{
				Key: key, Fingerprint: in.Fingerprints[b&1], OwnerToken: fmt.Sprintf("owner-%d", len(owners)),
				ProcessingTTL: fuzzTTLs[int(c)%len(fuzzTTLs)], Retention: fuzzRetentions[int(b>>1)%len(fuzzRetentions)],
			}
			got, err := s.BeginIdempotent(ctx, req)
			want, wantErr := m.begin(now, req)
			if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
				t.Fatalf("step %d: BeginIdempotent(%+v): err %v, want %v", step, req, err, wantErr)
			}
			if err == nil {
				sameIdem(t, step, got, want)
			}
			if got.Outcome == store.Execute {
				owners = append(owners, req.OwnerToken)
			}
		case 1:
			req := store.FinishIdempotent{Key: key, OwnerToken: owner(b), ResultTTL: fuzzTTLs[int(c)%len(fuzzTTLs)]}
			switch (b >> 4) % 3 {
			case 0:
				req.Result = bytes.Clone(result[:int(c)%(len(result)+1)])
			case 1:
				req.Failure = &store.Failure{Message: message[:int(c)%(len(message)+1)]}
			default:
				req.Failure = &store.Failure{Message: message, Retryable: true}
			}
			err := s.FinishIdempotent(ctx, req)
			wantErr := m.finish(now, req)
			if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
				t.Fatalf("step %d: FinishIdempotent(%+v): err %v, want %v", step, req, err, wantErr)
			}
			// The caller may reuse its buffers once the call returns.
			for i := range req.Result {
				req.Result[i] ^= 0xff
			}
			if req.Failure != nil {
				req.Failure.Message = "reused"
			}
		case 2:
			o, ttl := owner(b), fuzzTTLs[int(c)%len(fuzzTTLs)]
			got, err := s.ExtendIdempotent(ctx, key, o, ttl)
			want, wantErr := m.extend(now, key, o, ttl)
			if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) || !got.Equal(want) {
				t.Fatalf("step %d: ExtendIdempotent(%q, %q, %v) = %v, %v; want %v, %v", step, key, o, ttl, got, err, want, wantErr)
			}
		default:
			clk.Advance(fuzzAdvances[int(b)%len(fuzzAdvances)] * time.Duration(1+c%3))
		}
	}
}

// Durations the idempotency program picks from: the service passes a
// processing TTL and a result TTL of at least a millisecond; sub-microsecond
// parts check that the store truncates to microseconds, as the Redis store
// does.
var (
	fuzzTTLs       = []time.Duration{time.Millisecond, time.Millisecond + 999, 1500*time.Microsecond + 1, time.Second, time.Minute, time.Hour, 168 * time.Hour}
	fuzzRetentions = []time.Duration{time.Millisecond, time.Second + 1, time.Hour, 24 * time.Hour}
	fuzzAdvances   = []time.Duration{0, 1, 999, time.Microsecond, time.Millisecond - 1, time.Millisecond, time.Millisecond + 1, 500 * time.Millisecond, time.Second, 30 * time.Second, time.Hour, 25 * time.Hour}
)

func sameIdem(t testing.TB, step int, got, want store.IdemState) {
	t.Helper()
	sameFailure := (got.Failure == nil) == (want.Failure == nil) && (got.Failure == nil || *got.Failure == *want.Failure)
	if got.Outcome != want.Outcome || got.OwnerToken != want.OwnerToken || !bytes.Equal(got.Result, want.Result) || !sameFailure ||
		!got.ExpireTime.Equal(want.ExpireTime) || got.TTL != want.TTL {
		t.Fatalf("step %d: state\n\t%+v (failure %+v)\nwant\n\t%+v (failure %+v)", step, got, got.Failure, want, want.Failure)
	}
}

// idemModel is the contract of store.Idempotency, written from its
// documentation: a key is absent, processing (one owner until its deadline;
// then abandoned, remembered for fingerprint checks until retention after
// the deadline, and taken over by the next Begin with its fingerprint),
// completed or failed (until the result TTL); durations count in whole
// microseconds.
type idemModel struct{ recs map[string]*idemModelRec }

type idemModelRec struct {
	outcome          store.Outcome // Execute: processing
	fp, owner        string
	deadline, expire time.Time
	result           []byte
	failure          *store.Failure
}

func (m *idemModel) live(key string, now time.Time) *idemModelRec {
	r := m.recs[key]
	if r == nil || !now.Before(r.expire) {
		return nil
	}
	return r
}

func (m *idemModel) begin(now time.Time, req store.BeginIdempotent) (store.IdemState, error) {
	r := m.live(req.Key, now)
	switch {
	case r != nil && r.fp != req.Fingerprint:
		return store.IdemState{}, store.ErrFingerprintMismatch
	case r == nil || (r.outcome == store.Execute && !now.Before(r.deadline)):
		dl := now.Add(req.ProcessingTTL.Truncate(time.Microsecond))
		m.recs[req.Key] = &idemModelRec{outcome: store.Execute, fp: req.Fingerprint, owner: req.OwnerToken,
			deadline: dl, expire: dl.Add(req.Retention.Truncate(time.Microsecond))}
		return store.IdemState{Outcome: store.Execute, OwnerToken: req.OwnerToken, ExpireTime: dl, TTL: dl.Sub(now)}, nil
	case r.outcome == store.Execute:
		return store.IdemState{Outcome: store.InProgress, ExpireTime: r.deadline, TTL: r.deadline.Sub(now)}, nil
	default:
		return store.IdemState{Outcome: r.outcome, Result: r.result, Failure: r.failure, ExpireTime: r.expire, TTL: r.expire.Sub(now)}, nil
	}
}

func (m *idemModel) owned(key, owner string, now time.Time) *idemModelRec {
	r := m.live(key, now)
	if r == nil || r.outcome != store.Execute || r.owner != owner || !now.Before(r.deadline) {
		return nil
	}
	return r
}

func (m *idemModel) finish(now time.Time, req store.FinishIdempotent) error {
	r := m.owned(req.Key, req.OwnerToken, now)
	if r == nil {
		return store.ErrNotOwner
	}
	exp := now.Add(req.ResultTTL.Truncate(time.Microsecond))
	switch {
	case req.Failure != nil && req.Failure.Retryable:
		delete(m.recs, req.Key)
	case req.Failure != nil:
		m.recs[req.Key] = &idemModelRec{outcome: store.Failed, fp: r.fp, expire: exp, failure: &store.Failure{Message: req.Failure.Message}}
	default:
		m.recs[req.Key] = &idemModelRec{outcome: store.Completed, fp: r.fp, expire: exp, result: bytes.Clone(req.Result)}
	}
	return nil
}

func (m *idemModel) extend(now time.Time, key, owner string, ttl time.Duration) (time.Time, error) {
	r := m.owned(key, owner, now)
	if r == nil {
		return time.Time{}, store.ErrNotOwner
	}
	retention := r.expire.Sub(r.deadline)
	r.deadline = now.Add(ttl.Truncate(time.Microsecond))
	r.expire = r.deadline.Add(retention)
	return r.deadline, nil
}

// QueueInput is one input of a queue payload fuzz target.
type QueueInput struct {
	Queue   string // must not exist in the store yet
	P1, P2  []byte // payloads of arbitrary bytes
	Dedup   string // "" for none; else both messages share it
	Delayed bool   // enqueue with a delay of 1s
}

// QueuePayloads checks that payloads of arbitrary bytes come back from
// Claim exactly as enqueued, on the first delivery, after a Nack, after a
// dead letter's Redrive, and after the caller reused its buffer; and that a
// second Enqueue with the same dedup ID is a duplicate of the first and
// adds nothing.
func QueuePayloads(t testing.TB, s store.Queues, clk *clock.Fake, in QueueInput) {
	t.Helper()
	ctx := context.Background()
	// The fuzzer's arguments may share memory (P2 a part of P1): the
	// program scribbles on copies only.
	p1, p2 := bytes.Clone(in.P1), bytes.Clone(in.P2)
	want1, want2 := bytes.Clone(p1), bytes.Clone(p2)
	q := in.Queue

	enqueue := func(id string, p []byte, max int) store.Enqueued {
		t.Helper()
		m := store.NewMessage{ID: id, Payload: p, MaxAttempts: max, DedupID: in.Dedup, DedupWindow: time.Minute}
		if in.Delayed {
			m.Delay = time.Second
		}
		e, err := s.Enqueue(ctx, q, m)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		for i := range p { // the caller reuses its buffer
			p[i] = '#'
		}
		return e
	}
	e1 := enqueue("00000000000000000000000000000001", p1, 1)
	e2 := enqueue("00000000000000000000000000000002", p2, 5)
	dup := in.Dedup != ""
	if e2.Duplicate != dup || (dup && e2.ID != e1.ID) || e1.Duplicate {
		t.Fatalf("Enqueue with dedup ID %q: %+v then %+v", in.Dedup, e1, e2)
	}
	if in.Delayed {
		clk.Advance(time.Second)
	}

	claim := func(n int) []store.Message {
		t.Helper()
		tokens := []string{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccccccccccc"}[:n]
		c, err := s.Claim(ctx, q, store.Claim{Tokens: tokens, Visibility: time.Minute})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		return c.Messages
	}
	want := [][]byte{want1}
	if !dup {
		want = append(want, want2)
	}
	got := claim(3)
	if len(got) != len(want) {
		t.Fatalf("Claim: %d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		if !bytes.Equal(m.Payload, want[i]) {
			t.Fatalf("message %d: payload %q, want %q", i, m.Payload, want[i])
		}
	}

	// The first message has one attempt: its Nack makes it dead, and
	// Redrive makes it ready. The second, if any, is nacked back to
	// ready. Both then come back with their payloads intact.
	for _, m := range got {
		if _, err := s.Nack(ctx, q, m.Receipt, 0); err != nil {
			t.Fatalf("Nack: %v", err)
		}
	}
	if n, err := s.Redrive(ctx, q, 10); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v; want 1", n, err)
	}
	again := claim(3)
	if len(again) != len(want) {
		t.Fatalf("Claim after Nack: %d messages, want %d", len(again), len(want))
	}
	for _, m := range again {
		w := want1
		if m.ID != e1.ID {
			w = want2
		}
		if !bytes.Equal(m.Payload, w) {
			t.Fatalf("message %s after Nack: payload %q, want %q", m.ID, m.Payload, w)
		}
	}
}
