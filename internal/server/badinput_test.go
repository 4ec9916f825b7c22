package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
)

// This file sends every RPC malformed requests through the real gRPC client
// and checks that each is refused with INVALID_ARGUMENT, an ErrorInfo of
// reason INVALID_ARGUMENT naming the field (and a BadRequest naming it),
// and that nothing changed: the request made no call at all to the store
// (the services' store is wrapped in a storetest.Faulty, which counts
// every call, on every backend), and neither the number of records in the
// store (memory backend) nor the pre-existing state as seen through the API
// (a held lock, a session-bound lock, an in-progress idempotency key, a
// rate-limit key with consumption, a queue with ready, delayed, in-flight
// and dead messages, a held semaphore permit, an election with a leader)
// differs afterwards.
//
// Every bad request is a valid base request (TestBadInputControl shows that
// each base succeeds) with one field broken, so a case can only pass because
// that one field was refused.

// biPolicies configures the named rate-limit policies the cases use.
func biPolicies(c *config) {
	c.services.Policies = map[string]limiter.Policy{
		"log":    {Limit: store.Limit{Algorithm: store.SlidingLog, Limit: 10, Period: time.Hour}},
		"fixed":  {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Hour}},
		"bucket": {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: time.Minute, Burst: 5}},
	}
}

// biFixture is the state every case starts from.
type biFixture struct {
	lockName, lockToken string // a plain lock, held
	lockFence           uint64
	semName, semToken   string // a semaphore permit, held (a plain lease)
	electName           string // an election led by session
	electToken          string
	sessLock            string // a lock bound to session
	session             string // a live session, kept alive by ka
	ka                  coordv1.SessionService_KeepAliveClient
	idemKey, idemFP     string // an idempotency key in progress
	idemOwner           string
	rlKey               string // a key with one unit consumed under policy "log"
	queue               string // 1 ready, 1 delayed, 1 in flight (receipt), 1 dead (deadID)
	receipt             string
	deadID              string
}

func biSetup(t *testing.T, h *harness, f *storetest.Faulty) *biFixture {
	t.Helper()
	c := ctx(t)
	fx := &biFixture{
		lockName: "held-lock", sessLock: "session-lock", idemKey: "idem-key", idemFP: "fp-1",
		semName: "held-sem", electName: "led-election",
		rlKey: "rl-key", queue: "q",
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("setup: %s: %v", what, err)
		}
	}

	ka, err := h.sessions.KeepAlive(c)
	must("KeepAlive", err)
	must("KeepAlive.Send", ka.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(time.Minute)}))
	kr, err := ka.Recv()
	must("KeepAlive.Recv", err)
	fx.ka, fx.session = ka, kr.GetSessionId()
	// The stream subscribes to the session's wake-ups in the background and
	// then checks the session once: wait for that check, so that the calls
	// counted around a case are the case's own.
	biAwaitCalls(t, f, "CheckSession", 1)

	l, err := h.locks.Lock(c, &coordv1.LockRequest{Name: fx.lockName, Ttl: durationpb.New(10 * time.Minute), Owner: "holder", MaxHold: durationpb.New(time.Hour)})
	must("Lock", err)
	if !l.GetAcquired() {
		t.Fatalf("setup: Lock = %v, want acquired", l)
	}
	fx.lockToken, fx.lockFence = l.GetToken(), l.GetFence()
	sl, err := h.locks.Lock(c, &coordv1.LockRequest{Name: fx.sessLock, SessionId: fx.session, Owner: "session-holder"})
	must("Lock(session)", err)
	if !sl.GetAcquired() {
		t.Fatalf("setup: session Lock = %v, want acquired", sl)
	}
	// The binding wakes the stream, which checks the session again.
	biAwaitCalls(t, f, "CheckSession", 2)

	sem, err := h.semaphores.Acquire(c, &coordv1.AcquireRequest{Name: fx.semName, Limit: 2, Ttl: durationpb.New(10 * time.Minute), Owner: "sem-holder", MaxHold: durationpb.New(time.Hour)})
	must("Acquire", err)
	if !sem.GetAcquired() {
		t.Fatalf("setup: Acquire = %v, want acquired", sem)
	}
	fx.semToken = sem.GetToken()
	el, err := h.elections.Campaign(c, &coordv1.CampaignRequest{Name: fx.electName, Value: []byte("leader-1"), SessionId: fx.session})
	must("Campaign", err)
	if !el.GetElected() {
		t.Fatalf("setup: Campaign = %v, want elected", el)
	}
	fx.electToken = el.GetToken()
	biAwaitCalls(t, f, "CheckSession", 3) // the leadership's binding, as the lock's

	b, err := h.idem.BeginIdempotent(c, &coordv1.BeginIdempotentRequest{Key: fx.idemKey, Fingerprint: fx.idemFP, ProcessingTtl: durationpb.New(10 * time.Minute)})
	must("BeginIdempotent", err)
	if b.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
		t.Fatalf("setup: BeginIdempotent = %v, want EXECUTE", b)
	}
	fx.idemOwner = b.GetOwnerToken()

	a, err := h.limits.Allow(c, &coordv1.AllowRequest{Key: fx.rlKey, Policy: "log"})
	must("Allow", err)
	if !a.GetAllowed() {
		t.Fatalf("setup: Allow = %v, want allowed", a)
	}

	q := h.queues
	dead, err := q.Enqueue(c, &coordv1.EnqueueRequest{Queue: fx.queue, Payload: []byte("dead"), MaxAttempts: 1})
	must("Enqueue(dead)", err)
	fx.deadID = dead.GetMessageId()
	cl, err := q.Claim(c, &coordv1.ClaimRequest{Queue: fx.queue, VisibilityTimeout: durationpb.New(10 * time.Minute)})
	must("Claim(dead)", err)
	if len(cl.GetMessages()) != 1 {
		t.Fatalf("setup: Claim = %v, want 1 message", cl)
	}
	n, err := q.Nack(c, &coordv1.NackRequest{Queue: fx.queue, Receipt: cl.GetMessages()[0].GetReceipt(), Delay: durationpb.New(0)})
	must("Nack(dead)", err)
	if !n.GetDeadLettered() {
		t.Fatalf("setup: Nack = %v, want dead-lettered", n)
	}
	_, err = q.Enqueue(c, &coordv1.EnqueueRequest{Queue: fx.queue, Payload: []byte("in flight")})
	must("Enqueue(in flight)", err)
	cl, err = q.Claim(c, &coordv1.ClaimRequest{Queue: fx.queue, VisibilityTimeout: durationpb.New(10 * time.Minute)})
	must("Claim(in flight)", err)
	if len(cl.GetMessages()) != 1 {
		t.Fatalf("setup: Claim = %v, want 1 message", cl)
	}
	fx.receipt = cl.GetMessages()[0].GetReceipt()
	_, err = q.Enqueue(c, &coordv1.EnqueueRequest{Queue: fx.queue, Payload: []byte("ready")})
	must("Enqueue(ready)", err)
	_, err = q.Enqueue(c, &coordv1.EnqueueRequest{Queue: fx.queue, Payload: []byte("delayed"), Delay: durationpb.New(time.Hour)})
	must("Enqueue(delayed)", err)
	st, err := q.Stats(c, &coordv1.StatsRequest{Queue: fx.queue})
	must("Stats", err)
	if st.GetReady() != 1 || st.GetDelayed() != 1 || st.GetInFlight() != 1 || st.GetDead() != 1 {
		t.Fatalf("setup: Stats = %v, want 1 of each", st)
	}
	return fx
}

// biSnap is the fixture's state as the store and the API see it.
type biSnap struct {
	Len                 int
	Lock, SessLock      string
	Idem, Queue, Limits string
	Sem, Election       string
}

func biSnapshot(t *testing.T, h *harness, fx *biFixture) biSnap {
	t.Helper()
	c := ctx(t)
	s := biSnap{Len: -1} // records in the store, if it can count them
	if h.store != nil {
		s.Len = h.store.Len()
	}
	getLock := func(name string) string {
		g, err := h.locks.GetLock(c, &coordv1.GetLockRequest{Name: name})
		if err != nil {
			return "GetLock: " + err.Error()
		}
		return fmt.Sprintf("held=%v owner=%q fence=%d session_bound=%v expire=%v acquired=%v",
			g.GetHeld(), g.GetOwner(), g.GetFence(), g.GetSessionBound(), g.GetExpireTime().AsTime(), g.GetAcquireTime().AsTime())
	}
	s.Lock, s.SessLock = getLock(fx.lockName), getLock(fx.sessLock)
	if g, err := h.semaphores.GetSemaphore(c, &coordv1.GetSemaphoreRequest{Name: fx.semName}); err != nil {
		s.Sem = "GetSemaphore: " + err.Error()
	} else {
		s.Sem = fmt.Sprintf("limit=%d waiters=%d", g.GetLimit(), g.GetWaiters())
		for _, p := range g.GetHolders() {
			s.Sem += fmt.Sprintf(" {owner=%q fence=%d expire=%v}", p.GetOwner(), p.GetFence(), p.GetExpireTime().AsTime())
		}
	}
	if l, err := h.elections.Leader(c, &coordv1.LeaderRequest{Name: fx.electName}); err != nil {
		s.Election = "Leader: " + err.Error()
	} else {
		s.Election = fmt.Sprintf("has_leader=%v value=%q fence=%d rev=%d", l.GetHasLeader(), l.GetLeader().GetValue(), l.GetLeader().GetFence(), l.GetRev())
	}
	if b, err := h.idem.BeginIdempotent(c, &coordv1.BeginIdempotentRequest{Key: fx.idemKey, Fingerprint: fx.idemFP}); err != nil {
		s.Idem = "BeginIdempotent: " + err.Error()
	} else {
		s.Idem = fmt.Sprintf("outcome=%v expire=%v result=%q failure=%v", b.GetOutcome(), b.GetExpireTime().AsTime(), b.GetResult(), b.GetFailure())
	}
	if st, err := h.queues.Stats(c, &coordv1.StatsRequest{Queue: fx.queue}); err != nil {
		s.Queue = "Stats: " + err.Error()
	} else {
		s.Queue = fmt.Sprintf("ready=%d delayed=%d in_flight=%d dead=%d paused=%v", st.GetReady(), st.GetDelayed(), st.GetInFlight(), st.GetDead(), st.GetPaused())
	}
	if qs, err := h.queues.GetQueueSettings(c, &coordv1.GetQueueSettingsRequest{Queue: fx.queue}); err != nil {
		s.Queue += " GetQueueSettings: " + err.Error()
	} else {
		s.Queue += " settings=" + qs.GetSettings().String()
	}
	if ls, err := h.queues.ListSchedules(c, &coordv1.ListSchedulesRequest{}); err != nil {
		s.Queue += " ListSchedules: " + err.Error()
	} else {
		for _, sc := range ls.GetSchedules() {
			s.Queue += " schedule=" + sc.String()
		}
	}
	if a, err := h.limits.Allow(c, &coordv1.AllowRequest{Key: fx.rlKey, Policy: "log", Peek: true}); err != nil {
		s.Limits = "Allow: " + err.Error()
	} else {
		s.Limits = fmt.Sprintf("allowed=%v remaining=%d", a.GetAllowed(), a.GetRemaining())
	}
	if l, err := h.limits.ListPolicies(c, &coordv1.ListPoliciesRequest{}); err != nil {
		s.Limits += " ListPolicies: " + err.Error()
	} else {
		s.Limits += fmt.Sprintf(" runtime policies=%d", len(l.GetRuntime()))
	}
	return s
}

// biAwaitCalls waits until the store has had n calls of method: the
// fixture's session stream works in the background.
func biAwaitCalls(t *testing.T, f *storetest.Faulty, method string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); f.Calls(method) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("setup: %d %s calls after 10s, want %d", f.Calls(method), method, n)
		}
	}
}

// biCase is one malformed request.
type biCase struct {
	rpc, name string
	field     string // the field INVALID_ARGUMENT must name
	call      func(c context.Context, h *harness, fx *biFixture) (any, error)
}

// biRPC describes one RPC: a valid base request built on the fixture, and
// how to send it.
type biRPC[R proto.Message] struct {
	name string
	base func(fx *biFixture) R
	send func(c context.Context, h *harness, fx *biFixture, r R, o ...grpc.CallOption) (any, error)
	ok   func(resp any) error // optional: what a successful control response must satisfy
}

// bad is the base request with mut applied, sent with opts.
func (r biRPC[R]) bad(name, field string, mut func(fx *biFixture, req R), opts ...grpc.CallOption) biCase {
	return biCase{rpc: r.name, name: name, field: field, call: func(c context.Context, h *harness, fx *biFixture) (any, error) {
		req := r.base(fx)
		if mut != nil {
			mut(fx, req)
		}
		return r.send(c, h, fx, req, opts...)
	}}
}

// control is the base request with mut applied, which must succeed.
func (r biRPC[R]) control(name string, mut func(fx *biFixture, req R), opts ...grpc.CallOption) biCase {
	c := r.bad(name, "", mut, opts...)
	call := c.call
	c.call = func(ctx context.Context, h *harness, fx *biFixture) (any, error) {
		resp, err := call(ctx, h, fx)
		if err == nil && r.ok != nil {
			err = r.ok(resp)
		}
		return resp, err
	}
	return c
}

// biAppendCodec is the proto codec with extra wire bytes appended to every
// request. Protobuf's last-one-wins rule for singular fields lets a test
// override a string field with bytes the Go marshaller refuses to produce
// (invalid UTF-8), as a client in another language could send.
type biAppendCodec struct{ extra []byte }

func (c biAppendCodec) Marshal(v any) ([]byte, error) {
	b, err := proto.Marshal(v.(proto.Message))
	return append(b, c.extra...), err
}
func (biAppendCodec) Unmarshal(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }
func (biAppendCodec) Name() string                    { return "proto" }

// biRawString sends string field num as s, whatever bytes s holds.
func biRawString(num protowire.Number, s string) grpc.CallOption {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return grpc.ForceCodec(biAppendCodec{extra: protowire.AppendString(b, s)})
}

type biVal[T any] struct {
	name string
	v    T
}

var (
	biD       = durationpb.New
	biBadDurs = []biVal[*durationpb.Duration]{
		{"0s", biD(0)},
		{"-1s", biD(-time.Second)},
		{"-1ns", biD(-1)},
		{"500us", biD(500 * time.Microsecond)},
		{"invalid Duration (nanos sign)", &durationpb.Duration{Seconds: 1, Nanos: -1}},
		{"invalid Duration (seconds out of range)", &durationpb.Duration{Seconds: 315_576_000_001}},
	}
	biBadWaits = []biVal[*durationpb.Duration]{
		{"-1ms", biD(-time.Millisecond)},
		{"-1ns", biD(-1)},
		{"invalid Duration", &durationpb.Duration{Seconds: -1, Nanos: 1}},
	}
	// Bad names, keys and queue names (valid UTF-8, so the Go client sends
	// them as they are).
	biBadNames = []biVal[string]{
		{"empty", ""},
		{"257 bytes", strings.Repeat("n", 257)},
		{"NUL", "a\x00b"},
		{"newline", "a\nb"},
		{"U+0085", "\u0085"},
		{"DEL", "a\x7fb"},
		{"ESC", "\x1b[31m"},
		{"right-to-left override U+202E", "a\u202eb"},
		{"right-to-left isolate U+2067", "a\u2067b"},
		{"zero-width space U+200B", "a\u200bb"},
		{"byte order mark U+FEFF", "\ufeffa"},
	}
	// Invalid UTF-8, sent raw.
	biBadUTF8 = []biVal[string]{
		{"invalid UTF-8", "a\xffb"},
		{"truncated UTF-8", "ab\xc3"},
	}
	// Malformed tokens, from a valid one.
	biBadTokens = []biVal[func(string) string]{
		{"empty", func(string) string { return "" }},
		{"31 digits", func(s string) string { return s[:31] }},
		{"33 digits", func(s string) string { return s + "0" }},
		{"64 digits", func(s string) string { return s + s }},
		{"non-hex", func(s string) string { return "g" + s[1:] }},
		{"uppercase", biUpper},
		{"space", func(s string) string { return " " + s[1:] }},
	}
	// Malformed receipts, from a valid one (32 hex ID, 8 hex attempt, 32 hex
	// token).
	biBadReceipts = []biVal[func(string) string]{
		{"empty", func(string) string { return "" }},
		{"71 digits", func(s string) string { return s[:71] }},
		{"73 digits", func(s string) string { return s + "0" }},
		{"a token", func(s string) string { return s[40:] }},
		{"non-hex", func(s string) string { return s[:71] + "g" }},
		{"uppercase", biUpper},
		{"attempt 0", func(s string) string { return s[:32] + "00000000" + s[40:] }},
		{"attempt 2^31", func(s string) string { return s[:32] + "80000000" + s[40:] }},
		// A partition suffix (queue.partitioned): k and p in two hex digits.
		{"partition 3 of 3", func(s string) string { return s[:72] + "0303" }},
		{"partition 0 of 1", func(s string) string { return s[:72] + "0100" }},
		{"partition of 65", func(s string) string { return s[:72] + "4100" }},
		{"partition suffix of 2 digits", func(s string) string { return s[:72] + "03" }},
		{"partition suffix uppercase", func(s string) string { return s[:72] + "0A00" }},
		{"partition suffix non-hex", func(s string) string { return s[:72] + "03x0" }},
	}
)

// biRawDigest is a SHA-256 digest as raw bytes (of "coordd"): not UTF-8.
var biRawDigest = func() string {
	d := sha256.Sum256([]byte("coordd"))
	return string(d[:])
}()

// biUpper upper-cases a hex string, making sure it changes.
func biUpper(s string) string {
	if u := strings.ToUpper(s); u != s {
		return u
	}
	return "A" + s[1:]
}

// biNameCases are the cases of a required name field (number num).
func biNameCases[R proto.Message](r biRPC[R], field string, num protowire.Number, set func(R, string)) []biCase {
	var cs []biCase
	for _, v := range biBadNames {
		cs = append(cs, r.bad(field+"="+v.name, field, func(_ *biFixture, req R) { set(req, v.v) }))
	}
	for _, v := range biBadUTF8 {
		cs = append(cs, r.bad(field+"="+v.name, field, nil, biRawString(num, v.v)))
	}
	return cs
}

// biLabelCases are the cases of an optional label field (empty is valid).
func biLabelCases[R proto.Message](r biRPC[R], field string, num protowire.Number, set func(R, string)) []biCase {
	var cs []biCase
	for _, v := range biBadNames {
		if v.v == "" {
			continue
		}
		cs = append(cs, r.bad(field+"="+v.name, field, func(_ *biFixture, req R) { set(req, v.v) }))
	}
	for _, v := range biBadUTF8 {
		cs = append(cs, r.bad(field+"="+v.name, field, nil, biRawString(num, v.v)))
	}
	return cs
}

// biTokenCases are the cases of a token field; valid picks the fixture's
// valid token to break.
func biTokenCases[R proto.Message](r biRPC[R], field string, num protowire.Number, valid func(*biFixture) string, set func(R, string)) []biCase {
	var cs []biCase
	for _, v := range biBadTokens {
		cs = append(cs, r.bad(field+"="+v.name, field, func(fx *biFixture, req R) { set(req, v.v(valid(fx))) }))
	}
	cs = append(cs, r.bad(field+"=invalid UTF-8", field, nil, biRawString(num, strings.Repeat("\xff", 32))))
	return cs
}

// biDurCases are the cases of a TTL-like field: the bad durations, one just
// above max, and, if required, unset.
func biDurCases[R proto.Message](r biRPC[R], field string, max time.Duration, required bool, set func(R, *durationpb.Duration)) []biCase {
	vals := append([]biVal[*durationpb.Duration]{{fmt.Sprintf("max %v+1ms", max), biD(max + time.Millisecond)}}, biBadDurs...)
	if required {
		vals = append(vals, biVal[*durationpb.Duration]{"unset", nil})
	}
	var cs []biCase
	for _, v := range vals {
		cs = append(cs, r.bad(field+"="+v.name, field, func(_ *biFixture, req R) { set(req, v.v) }))
	}
	return cs
}

// biWaitCases are the cases of a wait or delay (0 is valid).
func biWaitCases[R proto.Message](r biRPC[R], field string, max time.Duration, set func(R, *durationpb.Duration)) []biCase {
	vals := append([]biVal[*durationpb.Duration]{{fmt.Sprintf("max %v+1ms", max), biD(max + time.Millisecond)}}, biBadWaits...)
	var cs []biCase
	for _, v := range vals {
		cs = append(cs, r.bad(field+"="+v.name, field, func(_ *biFixture, req R) { set(req, v.v) }))
	}
	return cs
}

// The RPCs, each with a valid base request on the fixture.
var (
	biLock = biRPC[*coordv1.LockRequest]{
		name: "LockService.Lock",
		base: func(*biFixture) *coordv1.LockRequest {
			return &coordv1.LockRequest{Name: "new-lock", Ttl: biD(10 * time.Second), Wait: biD(time.Second), Owner: "me", MaxHold: biD(time.Minute)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.LockRequest, o ...grpc.CallOption) (any, error) {
			return h.locks.Lock(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.LockResponse); !r.GetAcquired() {
				return fmt.Errorf("Lock = %v, want acquired", r)
			}
			return nil
		},
	}
	biRenew = biRPC[*coordv1.RenewRequest]{
		name: "LockService.Renew",
		base: func(fx *biFixture) *coordv1.RenewRequest {
			return &coordv1.RenewRequest{Name: fx.lockName, Token: fx.lockToken, Ttl: biD(20 * time.Minute)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.RenewRequest, o ...grpc.CallOption) (any, error) {
			return h.locks.Renew(c, r, o...)
		},
	}
	biRelease = biRPC[*coordv1.ReleaseRequest]{
		name: "LockService.Release",
		base: func(fx *biFixture) *coordv1.ReleaseRequest {
			return &coordv1.ReleaseRequest{Name: fx.lockName, Token: fx.lockToken}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ReleaseRequest, o ...grpc.CallOption) (any, error) {
			return h.locks.Release(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.ReleaseResponse); !r.GetReleased() {
				return fmt.Errorf("Release = %v, want released", r)
			}
			return nil
		},
	}
	biGetLock = biRPC[*coordv1.GetLockRequest]{
		name: "LockService.GetLock",
		base: func(fx *biFixture) *coordv1.GetLockRequest { return &coordv1.GetLockRequest{Name: fx.lockName} },
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.GetLockRequest, o ...grpc.CallOption) (any, error) {
			return h.locks.GetLock(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.GetLockResponse); !r.GetHeld() {
				return fmt.Errorf("GetLock = %v, want held", r)
			}
			return nil
		},
	}
	// The first request of a new KeepAlive stream. Accepted, the session is
	// ended by a half-close so that it does not outlive the call.
	biKeepAlive = biRPC[*coordv1.KeepAliveRequest]{
		name: "SessionService.KeepAlive/first",
		base: func(*biFixture) *coordv1.KeepAliveRequest {
			return &coordv1.KeepAliveRequest{Ttl: biD(time.Minute)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.KeepAliveRequest, o ...grpc.CallOption) (any, error) {
			s, err := h.sessions.KeepAlive(c, o...)
			if err != nil {
				return nil, err
			}
			if err := s.Send(r); err != nil && !errors.Is(err, io.EOF) { // io.EOF: the status comes from Recv
				return nil, err
			}
			resp, err := s.Recv()
			if err != nil {
				return nil, err
			}
			if err := s.CloseSend(); err != nil {
				return resp, fmt.Errorf("CloseSend: %w", err)
			}
			for {
				if _, err := s.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return resp, nil
					}
					return resp, fmt.Errorf("after half-close: %w", err)
				}
			}
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.KeepAliveResponse); len(r.GetSessionId()) != 32 || r.GetTtl().AsDuration() != time.Minute {
				return fmt.Errorf("KeepAlive = %v, want a new session with ttl 1m", r)
			}
			return nil
		},
	}
	// A later request on the fixture's live stream.
	biKeepAliveLater = biRPC[*coordv1.KeepAliveRequest]{
		name: "SessionService.KeepAlive/later",
		base: func(fx *biFixture) *coordv1.KeepAliveRequest {
			return &coordv1.KeepAliveRequest{SessionId: fx.session, Ttl: biD(2 * time.Minute)}
		},
		send: func(_ context.Context, _ *harness, fx *biFixture, r *coordv1.KeepAliveRequest, o ...grpc.CallOption) (any, error) {
			if len(o) > 0 {
				panic("call options do not apply to an open stream")
			}
			if err := fx.ka.Send(r); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return fx.ka.Recv()
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.KeepAliveResponse); r.GetTtl().AsDuration() < 2*time.Minute || r.GetExpired() {
				return fmt.Errorf("KeepAlive = %v, want ttl of at least 2m", r)
			}
			return nil
		},
	}
	biAllow = biRPC[*coordv1.AllowRequest]{
		name: "RateLimitService.Allow",
		base: func(fx *biFixture) *coordv1.AllowRequest {
			return &coordv1.AllowRequest{Key: fx.rlKey, Policy: "log", Cost: 1}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.AllowRequest, o ...grpc.CallOption) (any, error) {
			return h.limits.Allow(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.AllowResponse); !r.GetAllowed() {
				return fmt.Errorf("Allow = %v, want allowed", r)
			}
			return nil
		},
	}
	biBegin = biRPC[*coordv1.BeginIdempotentRequest]{
		name: "IdempotencyService.BeginIdempotent",
		base: func(*biFixture) *coordv1.BeginIdempotentRequest {
			return &coordv1.BeginIdempotentRequest{Key: "new-idem-key", Fingerprint: "fp-new", ProcessingTtl: biD(10 * time.Second), Wait: biD(time.Second)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.BeginIdempotentRequest, o ...grpc.CallOption) (any, error) {
			return h.idem.BeginIdempotent(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.BeginIdempotentResponse); r.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
				return fmt.Errorf("BeginIdempotent = %v, want EXECUTE", r)
			}
			return nil
		},
	}
	biFinish = biRPC[*coordv1.FinishRequest]{
		name: "IdempotencyService.Finish",
		base: func(fx *biFixture) *coordv1.FinishRequest {
			return &coordv1.FinishRequest{Key: fx.idemKey, OwnerToken: fx.idemOwner, Result: []byte("done"), ResultTtl: biD(time.Hour)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.FinishRequest, o ...grpc.CallOption) (any, error) {
			return h.idem.Finish(c, r, o...)
		},
	}
	biExtendIdem = biRPC[*coordv1.ExtendIdempotentRequest]{
		name: "IdempotencyService.ExtendIdempotent",
		base: func(fx *biFixture) *coordv1.ExtendIdempotentRequest {
			return &coordv1.ExtendIdempotentRequest{Key: fx.idemKey, OwnerToken: fx.idemOwner, ProcessingTtl: biD(20 * time.Minute)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ExtendIdempotentRequest, o ...grpc.CallOption) (any, error) {
			return h.idem.ExtendIdempotent(c, r, o...)
		},
	}
	biEnqueue = biRPC[*coordv1.EnqueueRequest]{
		name: "QueueService.Enqueue",
		base: func(fx *biFixture) *coordv1.EnqueueRequest {
			return &coordv1.EnqueueRequest{Queue: fx.queue, Payload: []byte("x"), Delay: biD(time.Second), DedupId: "new-dedup", MaxAttempts: 3}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.EnqueueRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.Enqueue(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.EnqueueResponse); r.GetDuplicate() || len(r.GetMessageId()) != 32 {
				return fmt.Errorf("Enqueue = %v, want a new message", r)
			}
			return nil
		},
	}
	biClaim = biRPC[*coordv1.ClaimRequest]{
		name: "QueueService.Claim",
		base: func(fx *biFixture) *coordv1.ClaimRequest {
			return &coordv1.ClaimRequest{Queue: fx.queue, MaxMessages: 2, VisibilityTimeout: biD(10 * time.Second), Wait: biD(time.Second)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ClaimRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.Claim(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.ClaimResponse); len(r.GetMessages()) != 1 {
				return fmt.Errorf("Claim = %v, want the ready message", r)
			}
			return nil
		},
	}
	biAck = biRPC[*coordv1.AckRequest]{
		name: "QueueService.Ack",
		base: func(fx *biFixture) *coordv1.AckRequest {
			return &coordv1.AckRequest{Queue: fx.queue, Receipt: fx.receipt}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.AckRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.Ack(c, r, o...)
		},
	}
	biNack = biRPC[*coordv1.NackRequest]{
		name: "QueueService.Nack",
		base: func(fx *biFixture) *coordv1.NackRequest {
			return &coordv1.NackRequest{Queue: fx.queue, Receipt: fx.receipt, Delay: biD(time.Second)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.NackRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.Nack(c, r, o...)
		},
	}
	biExtend = biRPC[*coordv1.ExtendRequest]{
		name: "QueueService.Extend",
		base: func(fx *biFixture) *coordv1.ExtendRequest {
			return &coordv1.ExtendRequest{Queue: fx.queue, Receipt: fx.receipt, VisibilityTimeout: biD(time.Minute)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ExtendRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.Extend(c, r, o...)
		},
	}
	biStats = biRPC[*coordv1.StatsRequest]{
		name: "QueueService.Stats",
		base: func(fx *biFixture) *coordv1.StatsRequest { return &coordv1.StatsRequest{Queue: fx.queue} },
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.StatsRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.Stats(c, r, o...)
		},
	}
	biRedrive = biRPC[*coordv1.RedriveRequest]{
		name: "QueueService.Redrive",
		base: func(fx *biFixture) *coordv1.RedriveRequest {
			return &coordv1.RedriveRequest{Queue: fx.queue, MaxMessages: 5}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.RedriveRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.Redrive(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.RedriveResponse); r.GetMoved() != 1 {
				return fmt.Errorf("Redrive = %v, want 1 moved", r)
			}
			return nil
		},
	}
)

// The dead-letter RPCs.
var (
	biListDead = biRPC[*coordv1.ListDeadLettersRequest]{
		name: "QueueService.ListDeadLetters",
		base: func(fx *biFixture) *coordv1.ListDeadLettersRequest {
			return &coordv1.ListDeadLettersRequest{Queue: fx.queue, PageSize: 10, PreviewBytes: 2}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ListDeadLettersRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.ListDeadLetters(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.ListDeadLettersResponse); len(r.GetDeadLetters()) != 1 || r.GetNextPageToken() != "" {
				return fmt.Errorf("ListDeadLetters = %v, want 1 dead letter and no next page", r)
			}
			return nil
		},
	}
	biPurgeDead = biRPC[*coordv1.PurgeDeadLettersRequest]{
		name: "QueueService.PurgeDeadLetters",
		base: func(fx *biFixture) *coordv1.PurgeDeadLettersRequest {
			return &coordv1.PurgeDeadLettersRequest{Queue: fx.queue, MaxMessages: 5}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.PurgeDeadLettersRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.PurgeDeadLetters(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.PurgeDeadLettersResponse); r.GetPurged() != 1 || r.GetRemaining() != 0 {
				return fmt.Errorf("PurgeDeadLetters = %v, want 1 purged, 0 remaining", r)
			}
			return nil
		},
	}
)

// The queue settings RPCs.
var (
	biPause = biRPC[*coordv1.PauseQueueRequest]{
		name: "QueueService.PauseQueue",
		base: func(fx *biFixture) *coordv1.PauseQueueRequest { return &coordv1.PauseQueueRequest{Queue: fx.queue} },
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.PauseQueueRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.PauseQueue(c, r, o...)
		},
		ok: func(resp any) error {
			if !resp.(*coordv1.PauseQueueResponse).GetSettings().GetPaused() {
				return fmt.Errorf("PauseQueue = %v, want paused", resp)
			}
			return nil
		},
	}
	biResume = biRPC[*coordv1.ResumeQueueRequest]{
		name: "QueueService.ResumeQueue",
		base: func(fx *biFixture) *coordv1.ResumeQueueRequest { return &coordv1.ResumeQueueRequest{Queue: fx.queue} },
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ResumeQueueRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.ResumeQueue(c, r, o...)
		},
	}
	biConfigure = biRPC[*coordv1.ConfigureQueueRequest]{
		name: "QueueService.ConfigureQueue",
		base: func(fx *biFixture) *coordv1.ConfigureQueueRequest {
			return &coordv1.ConfigureQueueRequest{Queue: fx.queue, MaxInFlight: 5, ClaimRate: &coordv1.ClaimRate{Limit: 10, Period: biD(time.Second)}}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ConfigureQueueRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.ConfigureQueue(c, r, o...)
		},
	}
	biQueueSettings = biRPC[*coordv1.GetQueueSettingsRequest]{
		name: "QueueService.GetQueueSettings",
		base: func(fx *biFixture) *coordv1.GetQueueSettingsRequest {
			return &coordv1.GetQueueSettingsRequest{Queue: fx.queue}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.GetQueueSettingsRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.GetQueueSettings(c, r, o...)
		},
	}
)

// The schedule RPCs.
var (
	biPutSchedule = biRPC[*coordv1.PutScheduleRequest]{
		name: "QueueService.PutSchedule",
		base: func(fx *biFixture) *coordv1.PutScheduleRequest {
			return &coordv1.PutScheduleRequest{Queue: fx.queue, Name: "nightly", Spec: "0 3 * * *", TimeZone: "Europe/Paris",
				Payload: []byte("run"), Group: "g", Priority: 2, MaxAttempts: 3}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.PutScheduleRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.PutSchedule(c, r, o...)
		},
		ok: func(resp any) error {
			if s := resp.(*coordv1.PutScheduleResponse).GetSchedule(); s.GetNextTime() == nil || s.GetName() == "" {
				return fmt.Errorf("PutSchedule = %v, want the schedule with its next tick", resp)
			}
			return nil
		},
	}
	biDeleteSchedule = biRPC[*coordv1.DeleteScheduleRequest]{
		name: "QueueService.DeleteSchedule",
		base: func(fx *biFixture) *coordv1.DeleteScheduleRequest {
			return &coordv1.DeleteScheduleRequest{Queue: fx.queue, Name: "nightly"}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.DeleteScheduleRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.DeleteSchedule(c, r, o...)
		},
	}
	biListSchedules = biRPC[*coordv1.ListSchedulesRequest]{
		name: "QueueService.ListSchedules",
		base: func(fx *biFixture) *coordv1.ListSchedulesRequest {
			return &coordv1.ListSchedulesRequest{Queue: fx.queue}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ListSchedulesRequest, o ...grpc.CallOption) (any, error) {
			return h.queues.ListSchedules(c, r, o...)
		},
	}
)

// The runtime policy RPCs.
var (
	biPutPolicy = biRPC[*coordv1.PutPolicyRequest]{
		name: "RateLimitService.PutPolicy",
		base: func(*biFixture) *coordv1.PutPolicyRequest {
			return &coordv1.PutPolicyRequest{Policy: &coordv1.Policy{Name: "runtime", Limit: biLimit(biToken, 10, time.Second, 20),
				OnStoreFailure: coordv1.OnStoreFailure_ON_STORE_FAILURE_LOCAL, LocalQuota: 5}}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.PutPolicyRequest, o ...grpc.CallOption) (any, error) {
			return h.limits.PutPolicy(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.PutPolicyResponse); !r.GetCreated() {
				return fmt.Errorf("PutPolicy = %v, want created", r)
			}
			return nil
		},
	}
	biDeletePolicy = biRPC[*coordv1.DeletePolicyRequest]{
		name: "RateLimitService.DeletePolicy",
		base: func(*biFixture) *coordv1.DeletePolicyRequest { return &coordv1.DeletePolicyRequest{Name: "runtime"} },
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.DeletePolicyRequest, o ...grpc.CallOption) (any, error) {
			return h.limits.DeletePolicy(c, r, o...)
		},
	}
	biListPolicies = biRPC[*coordv1.ListPoliciesRequest]{
		name: "RateLimitService.ListPolicies",
		base: func(*biFixture) *coordv1.ListPoliciesRequest { return &coordv1.ListPoliciesRequest{} },
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ListPoliciesRequest, o ...grpc.CallOption) (any, error) {
			return h.limits.ListPolicies(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.ListPoliciesResponse); len(r.GetConfig()) != 3 {
				return fmt.Errorf("ListPolicies = %v, want the 3 config policies", r)
			}
			return nil
		},
	}
)

// biNoInput are the RPCs whose request has no field: no bad input.
var biNoInput = map[string]bool{"RateLimitService.ListPolicies": true}

// The RPCs added with semaphores, elections and fence checks.
var (
	biCheckFence = biRPC[*coordv1.CheckFenceRequest]{
		name: "LockService.CheckFence",
		base: func(fx *biFixture) *coordv1.CheckFenceRequest {
			return &coordv1.CheckFenceRequest{Name: fx.lockName, Fence: fx.lockFence}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.CheckFenceRequest, o ...grpc.CallOption) (any, error) {
			return h.locks.CheckFence(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.CheckFenceResponse); !r.GetCurrent() {
				return fmt.Errorf("CheckFence = %v, want current", r)
			}
			return nil
		},
	}
	biAcquire = biRPC[*coordv1.AcquireRequest]{
		name: "SemaphoreService.Acquire",
		base: func(*biFixture) *coordv1.AcquireRequest {
			return &coordv1.AcquireRequest{Name: "new-sem", Limit: 3, Ttl: biD(10 * time.Second), Wait: biD(time.Second), Owner: "me", MaxHold: biD(time.Minute)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.AcquireRequest, o ...grpc.CallOption) (any, error) {
			return h.semaphores.Acquire(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.AcquireResponse); !r.GetAcquired() {
				return fmt.Errorf("Acquire = %v, want acquired", r)
			}
			return nil
		},
	}
	biSemRenew = biRPC[*coordv1.SemaphoreServiceRenewRequest]{
		name: "SemaphoreService.Renew",
		base: func(fx *biFixture) *coordv1.SemaphoreServiceRenewRequest {
			return &coordv1.SemaphoreServiceRenewRequest{Name: fx.semName, Token: fx.semToken, Ttl: biD(20 * time.Minute)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.SemaphoreServiceRenewRequest, o ...grpc.CallOption) (any, error) {
			return h.semaphores.Renew(c, r, o...)
		},
	}
	biSemRelease = biRPC[*coordv1.SemaphoreServiceReleaseRequest]{
		name: "SemaphoreService.Release",
		base: func(fx *biFixture) *coordv1.SemaphoreServiceReleaseRequest {
			return &coordv1.SemaphoreServiceReleaseRequest{Name: fx.semName, Token: fx.semToken}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.SemaphoreServiceReleaseRequest, o ...grpc.CallOption) (any, error) {
			return h.semaphores.Release(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.SemaphoreServiceReleaseResponse); !r.GetReleased() {
				return fmt.Errorf("Release = %v, want released", r)
			}
			return nil
		},
	}
	biGetSemaphore = biRPC[*coordv1.GetSemaphoreRequest]{
		name: "SemaphoreService.GetSemaphore",
		base: func(fx *biFixture) *coordv1.GetSemaphoreRequest {
			return &coordv1.GetSemaphoreRequest{Name: fx.semName}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.GetSemaphoreRequest, o ...grpc.CallOption) (any, error) {
			return h.semaphores.GetSemaphore(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.GetSemaphoreResponse); len(r.GetHolders()) != 1 || r.GetLimit() != 2 {
				return fmt.Errorf("GetSemaphore = %v, want one holder of limit 2", r)
			}
			return nil
		},
	}
	biCampaign = biRPC[*coordv1.CampaignRequest]{
		name: "ElectionService.Campaign",
		base: func(fx *biFixture) *coordv1.CampaignRequest {
			return &coordv1.CampaignRequest{Name: "new-election", Value: []byte("me"), SessionId: fx.session, Wait: biD(time.Second)}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.CampaignRequest, o ...grpc.CallOption) (any, error) {
			return h.elections.Campaign(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.CampaignResponse); !r.GetElected() || r.GetAlreadyLeader() {
				return fmt.Errorf("Campaign = %v, want newly elected", r)
			}
			return nil
		},
	}
	biProclaim = biRPC[*coordv1.ProclaimRequest]{
		name: "ElectionService.Proclaim",
		base: func(fx *biFixture) *coordv1.ProclaimRequest {
			return &coordv1.ProclaimRequest{Name: fx.electName, Token: fx.electToken, Value: []byte("leader-2")}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ProclaimRequest, o ...grpc.CallOption) (any, error) {
			return h.elections.Proclaim(c, r, o...)
		},
	}
	biResign = biRPC[*coordv1.ResignRequest]{
		name: "ElectionService.Resign",
		base: func(fx *biFixture) *coordv1.ResignRequest {
			return &coordv1.ResignRequest{Name: fx.electName, Token: fx.electToken}
		},
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ResignRequest, o ...grpc.CallOption) (any, error) {
			return h.elections.Resign(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.ResignResponse); !r.GetResigned() {
				return fmt.Errorf("Resign = %v, want resigned", r)
			}
			return nil
		},
	}
	biLeader = biRPC[*coordv1.LeaderRequest]{
		name: "ElectionService.Leader",
		base: func(fx *biFixture) *coordv1.LeaderRequest { return &coordv1.LeaderRequest{Name: fx.electName} },
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.LeaderRequest, o ...grpc.CallOption) (any, error) {
			return h.elections.Leader(c, r, o...)
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.LeaderResponse); !r.GetHasLeader() || string(r.GetLeader().GetValue()) != "leader-1" {
				return fmt.Errorf("Leader = %v, want leader-1", r)
			}
			return nil
		},
	}
	// Observe: the first response of a new stream (the current leader);
	// the stream is then cancelled.
	biObserve = biRPC[*coordv1.ObserveRequest]{
		name: "ElectionService.Observe",
		base: func(fx *biFixture) *coordv1.ObserveRequest { return &coordv1.ObserveRequest{Name: fx.electName} },
		send: func(c context.Context, h *harness, _ *biFixture, r *coordv1.ObserveRequest, o ...grpc.CallOption) (any, error) {
			c, cancel := context.WithCancel(c)
			defer cancel()
			s, err := h.elections.Observe(c, r, o...)
			if err != nil {
				return nil, err
			}
			return s.Recv()
		},
		ok: func(resp any) error {
			if r := resp.(*coordv1.ObserveResponse); !r.GetHasLeader() || string(r.GetLeader().GetValue()) != "leader-1" || r.GetMissed() != 0 {
				return fmt.Errorf("Observe's first response = %v, want leader-1", r)
			}
			return nil
		},
	}
)

// biInline replaces the policy with an inline limit.
func biInline(l *coordv1.Limit) func(*biFixture, *coordv1.AllowRequest) {
	return func(_ *biFixture, r *coordv1.AllowRequest) { r.Policy, r.Limit = "", l }
}

func biLimit(a coordv1.Algorithm, limit int64, period time.Duration, burst int64) *coordv1.Limit {
	return &coordv1.Limit{Algorithm: a, Limit: limit, Period: biD(period), Burst: burst}
}

const (
	biFixed   = coordv1.Algorithm_ALGORITHM_FIXED_WINDOW
	biSliding = coordv1.Algorithm_ALGORITHM_SLIDING_WINDOW
	biLog     = coordv1.Algorithm_ALGORITHM_SLIDING_LOG
	biToken   = coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET
	biLeaky   = coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET
)

func biCases() []biCase {
	var cs []biCase
	add := func(more ...biCase) { cs = append(cs, more...) }
	addAll := func(more []biCase) { cs = append(cs, more...) }

	// Lock.
	addAll(biNameCases(biLock, "name", 1, func(r *coordv1.LockRequest, s string) { r.Name = s }))
	addAll(biLabelCases(biLock, "owner", 5, func(r *coordv1.LockRequest, s string) { r.Owner = s }))
	addAll(biDurCases(biLock, "ttl", time.Hour, false, func(r *coordv1.LockRequest, d *durationpb.Duration) { r.Ttl = d }))
	addAll(biDurCases(biLock, "max_hold", 24*time.Hour, false, func(r *coordv1.LockRequest, d *durationpb.Duration) { r.MaxHold = d }))
	addAll(biWaitCases(biLock, "wait", time.Minute, func(r *coordv1.LockRequest, d *durationpb.Duration) { r.Wait = d }))
	for _, v := range biBadTokens {
		if v.name == "empty" {
			continue // empty is a plain lease
		}
		add(biLock.bad("session_id="+v.name, "session_id", func(fx *biFixture, r *coordv1.LockRequest) { r.SessionId, r.Ttl = v.v(fx.session), nil }))
	}
	add(biLock.bad("session_id=invalid UTF-8", "session_id", func(_ *biFixture, r *coordv1.LockRequest) { r.Ttl = nil }, biRawString(4, strings.Repeat("\xff", 32))))
	add(biLock.bad("session-bound with ttl=10s", "ttl", func(fx *biFixture, r *coordv1.LockRequest) { r.SessionId = fx.session }))
	add(biLock.bad("session-bound with ttl=0s", "ttl", func(fx *biFixture, r *coordv1.LockRequest) { r.SessionId, r.Ttl = fx.session, biD(0) }))

	// Renew, on the held lock.
	addAll(biNameCases(biRenew, "name", 1, func(r *coordv1.RenewRequest, s string) { r.Name = s }))
	addAll(biTokenCases(biRenew, "token", 2, func(fx *biFixture) string { return fx.lockToken }, func(r *coordv1.RenewRequest, s string) { r.Token = s }))
	addAll(biDurCases(biRenew, "ttl", time.Hour, true, func(r *coordv1.RenewRequest, d *durationpb.Duration) { r.Ttl = d }))

	// Release, of the held lock.
	addAll(biNameCases(biRelease, "name", 1, func(r *coordv1.ReleaseRequest, s string) { r.Name = s }))
	addAll(biTokenCases(biRelease, "token", 2, func(fx *biFixture) string { return fx.lockToken }, func(r *coordv1.ReleaseRequest, s string) { r.Token = s }))

	// GetLock.
	addAll(biNameCases(biGetLock, "name", 1, func(r *coordv1.GetLockRequest, s string) { r.Name = s }))

	// KeepAlive, first request: the session must not be created.
	ttlSet := func(r *coordv1.KeepAliveRequest, d *durationpb.Duration) { r.Ttl = d }
	for _, rpc := range []biRPC[*coordv1.KeepAliveRequest]{biKeepAlive, biKeepAliveLater} {
		add(rpc.bad("ttl=5ms (below min_ttl 10ms)", "ttl", func(_ *biFixture, r *coordv1.KeepAliveRequest) { r.Ttl = biD(5 * time.Millisecond) }))
		addAll(biDurCases(rpc, "ttl", 5*time.Minute, false, ttlSet))
	}
	for _, v := range biBadTokens {
		if v.name == "empty" {
			continue // empty creates a session
		}
		add(biKeepAlive.bad("session_id="+v.name, "session_id", func(fx *biFixture, r *coordv1.KeepAliveRequest) { r.SessionId = v.v(fx.session) }))
		add(biKeepAliveLater.bad("session_id="+v.name, "session_id", func(fx *biFixture, r *coordv1.KeepAliveRequest) { r.SessionId = v.v(fx.session) }))
	}
	add(biKeepAlive.bad("session_id=invalid UTF-8", "session_id", nil, biRawString(1, strings.Repeat("\xff", 32))))
	add(biKeepAliveLater.bad("session_id=another session's", "session_id", func(_ *biFixture, r *coordv1.KeepAliveRequest) {
		r.SessionId = strings.Repeat("0", 32)
	}))

	// Allow, on the key with consumption.
	addAll(biNameCases(biAllow, "key", 1, func(r *coordv1.AllowRequest, s string) { r.Key = s }))
	add(
		biAllow.bad("policy=unknown", "policy", func(_ *biFixture, r *coordv1.AllowRequest) { r.Policy = "no-such-policy" }),
		biAllow.bad("policy=257 bytes", "policy", func(_ *biFixture, r *coordv1.AllowRequest) { r.Policy = strings.Repeat("p", 257) }),
		biAllow.bad("policy=invalid UTF-8", "policy", nil, biRawString(2, "lo\xffg")),
		biAllow.bad("policy and limit", "policy", func(_ *biFixture, r *coordv1.AllowRequest) { r.Limit = biLimit(biLog, 10, time.Hour, 0) }),
		biAllow.bad("neither policy nor limit", "policy", func(_ *biFixture, r *coordv1.AllowRequest) { r.Policy = "" }),
		biAllow.bad("cost=-1", "cost", func(_ *biFixture, r *coordv1.AllowRequest) { r.Cost = -1 }),
		biAllow.bad("cost=MinInt64", "cost", func(_ *biFixture, r *coordv1.AllowRequest) { r.Cost = math.MinInt64 }),
		biAllow.bad("cost=11 above policy limit 10", "cost", func(_ *biFixture, r *coordv1.AllowRequest) { r.Policy, r.Cost = "fixed", 11 }),
		biAllow.bad("cost=11 above sliding-log policy limit 10", "cost", func(_ *biFixture, r *coordv1.AllowRequest) { r.Cost = 11 }),
		biAllow.bad("cost=6 above policy bucket capacity 5", "cost", func(_ *biFixture, r *coordv1.AllowRequest) { r.Policy, r.Cost = "bucket", 6 }),
		biAllow.bad("cost=MaxInt64", "cost", func(_ *biFixture, r *coordv1.AllowRequest) { r.Cost = math.MaxInt64 }),
		biAllow.bad("wait=-1s", "wait", func(_ *biFixture, r *coordv1.AllowRequest) { r.Wait = dur(-time.Second) }),
		biAllow.bad("wait=61s over max_wait", "wait", func(_ *biFixture, r *coordv1.AllowRequest) { r.Wait = dur(61 * time.Second) }),
		biAllow.bad("wait with peek", "wait", func(_ *biFixture, r *coordv1.AllowRequest) { r.Wait, r.Peek = dur(time.Second), true }),
	)
	costOver := func(l *coordv1.Limit, cost int64) func(*biFixture, *coordv1.AllowRequest) {
		return func(fx *biFixture, r *coordv1.AllowRequest) { biInline(l)(fx, r); r.Cost = cost }
	}
	add(
		biAllow.bad("inline fixed window cost=11 above limit 10", "cost", costOver(biLimit(biFixed, 10, time.Hour, 0), 11)),
		biAllow.bad("inline sliding window cost=11 above limit 10", "cost", costOver(biLimit(biSliding, 10, time.Hour, 0), 11)),
		biAllow.bad("inline token bucket cost=11 above limit 10", "cost", costOver(biLimit(biToken, 10, time.Hour, 0), 11)),
		biAllow.bad("inline token bucket cost=4 above burst 3", "cost", costOver(biLimit(biToken, 10, time.Hour, 3), 4)),
		biAllow.bad("inline leaky bucket cost=2 above default capacity 1", "cost", costOver(biLimit(biLeaky, 10, time.Hour, 0), 2)),
		biAllow.bad("inline leaky bucket cost=6 above burst 5", "cost", costOver(biLimit(biLeaky, 10, time.Hour, 5), 6)),
		biAllow.bad("inline cost=-1", "cost", costOver(biLimit(biToken, 10, time.Hour, 0), -1)),
		biAllow.bad("limit.limit=0", "limit.limit", biInline(biLimit(biFixed, 0, time.Hour, 0))),
		biAllow.bad("limit.limit=-1", "limit.limit", biInline(biLimit(biToken, -1, time.Hour, 0))),
		biAllow.bad("limit.limit=1e9+1", "limit.limit", biInline(biLimit(biFixed, 1_000_000_001, time.Hour, 0))),
		biAllow.bad("limit.limit=1001 on a sliding log", "limit.limit", biInline(biLimit(biLog, 1001, time.Hour, 0))),
		biAllow.bad("limit.algorithm=UNSPECIFIED", "limit.algorithm", biInline(biLimit(coordv1.Algorithm_ALGORITHM_UNSPECIFIED, 10, time.Hour, 0))),
		biAllow.bad("limit.algorithm=99", "limit.algorithm", biInline(biLimit(coordv1.Algorithm(99), 10, time.Hour, 0))),
		biAllow.bad("limit.algorithm=-1", "limit.algorithm", biInline(biLimit(coordv1.Algorithm(-1), 10, time.Hour, 0))),
		biAllow.bad("limit.burst on a fixed window", "limit.burst", biInline(biLimit(biFixed, 10, time.Hour, 1))),
		biAllow.bad("limit.burst on a sliding window", "limit.burst", biInline(biLimit(biSliding, 10, time.Hour, 5))),
		biAllow.bad("limit.burst on a sliding log", "limit.burst", biInline(biLimit(biLog, 10, time.Hour, 10))),
		biAllow.bad("limit.burst=-1 on a token bucket", "limit.burst", biInline(biLimit(biToken, 10, time.Hour, -1))),
		biAllow.bad("limit.burst above ratelimit.max_limit on a token bucket", "limit.burst", biInline(biLimit(biToken, 10, time.Hour, 1_000_000_001))),
		biAllow.bad("limit.burst above ratelimit.max_limit on a leaky bucket", "limit.burst", biInline(biLimit(biLeaky, 10, time.Hour, 1_000_000_001))),
		biAllow.bad("limit empty", "limit.period", biInline(&coordv1.Limit{})),
		// Rates the store cannot represent exactly: refused, never rounded.
		biAllow.bad("limit.period=1s+1ns", "limit.period", biInline(biLimit(biFixed, 10, time.Second+time.Nanosecond, 0))),
		biAllow.bad("token bucket limit=3 in 1s, not a whole µs a unit", "limit.limit", biInline(biLimit(biToken, 3, time.Second, 0))),
		biAllow.bad("leaky bucket limit=2000 in 1ms, over one unit per µs", "limit.limit", biInline(biLimit(biLeaky, 2000, time.Millisecond, 0))),
		biAllow.bad("token bucket limit=1e9 in 1ms", "limit.limit", biInline(biLimit(biToken, 1_000_000_000, time.Millisecond, 0))),
	)
	addAll(biDurCases(biAllow, "limit.period", 168*time.Hour, true, func(r *coordv1.AllowRequest, d *durationpb.Duration) {
		r.Policy, r.Limit = "", &coordv1.Limit{Algorithm: biToken, Limit: 10, Period: d}
	}))

	// BeginIdempotent, of a fresh key.
	addAll(biNameCases(biBegin, "key", 1, func(r *coordv1.BeginIdempotentRequest, s string) { r.Key = s }))
	add(
		biBegin.bad("fingerprint=empty", "fingerprint", func(_ *biFixture, r *coordv1.BeginIdempotentRequest) { r.Fingerprint = "" }),
		biBegin.bad("fingerprint=257 bytes", "fingerprint", func(_ *biFixture, r *coordv1.BeginIdempotentRequest) { r.Fingerprint = strings.Repeat("f", 257) }),
		biBegin.bad("fingerprint=invalid UTF-8", "fingerprint", nil, biRawString(2, "fp\xff")),
		// A raw digest is not text: the fingerprint is a string, e.g. hex.
		biBegin.bad("fingerprint=raw SHA-256 bytes", "fingerprint", nil, biRawString(2, biRawDigest)),
		biBegin.bad("fingerprint=NUL", "fingerprint", func(_ *biFixture, r *coordv1.BeginIdempotentRequest) { r.Fingerprint = "fp\x00" }),
		biBegin.bad("fingerprint=U+202E", "fingerprint", func(_ *biFixture, r *coordv1.BeginIdempotentRequest) { r.Fingerprint = "fp\u202e" }),
	)
	addAll(biDurCases(biBegin, "processing_ttl", time.Hour, false, func(r *coordv1.BeginIdempotentRequest, d *durationpb.Duration) { r.ProcessingTtl = d }))
	addAll(biWaitCases(biBegin, "wait", time.Minute, func(r *coordv1.BeginIdempotentRequest, d *durationpb.Duration) { r.Wait = d }))

	// Finish, of the key in progress, by its owner.
	addAll(biNameCases(biFinish, "key", 1, func(r *coordv1.FinishRequest, s string) { r.Key = s }))
	addAll(biTokenCases(biFinish, "owner_token", 2, func(fx *biFixture) string { return fx.idemOwner }, func(r *coordv1.FinishRequest, s string) { r.OwnerToken = s }))
	add(
		biFinish.bad("result=1MiB+1", "result", func(_ *biFixture, r *coordv1.FinishRequest) { r.Result = make([]byte, 1<<20+1) }),
		biFinish.bad("failure.message=4097 bytes", "failure.message", func(_ *biFixture, r *coordv1.FinishRequest) {
			r.Result, r.Failure = nil, &coordv1.Failure{Message: strings.Repeat("m", 4097)}
		}),
		biFinish.bad("failure.message=4097 bytes retryable", "failure.message", func(_ *biFixture, r *coordv1.FinishRequest) {
			r.Result, r.Failure = nil, &coordv1.Failure{Message: strings.Repeat("m", 4097), Retryable: true}
		}),
		biFinish.bad("result and failure", "failure", func(_ *biFixture, r *coordv1.FinishRequest) { r.Failure = &coordv1.Failure{Message: "boom"} }),
		biFinish.bad("result and retryable failure", "failure", func(_ *biFixture, r *coordv1.FinishRequest) {
			r.Failure = &coordv1.Failure{Message: "boom", Retryable: true}
		}),
	)
	addAll(biDurCases(biFinish, "result_ttl", 168*time.Hour, false, func(r *coordv1.FinishRequest, d *durationpb.Duration) { r.ResultTtl = d }))

	// ExtendIdempotent, of the key in progress, by its owner.
	addAll(biNameCases(biExtendIdem, "key", 1, func(r *coordv1.ExtendIdempotentRequest, s string) { r.Key = s }))
	addAll(biTokenCases(biExtendIdem, "owner_token", 2, func(fx *biFixture) string { return fx.idemOwner }, func(r *coordv1.ExtendIdempotentRequest, s string) { r.OwnerToken = s }))
	addAll(biDurCases(biExtendIdem, "processing_ttl", time.Hour, true, func(r *coordv1.ExtendIdempotentRequest, d *durationpb.Duration) { r.ProcessingTtl = d }))

	// Enqueue.
	addAll(biNameCases(biEnqueue, "queue", 1, func(r *coordv1.EnqueueRequest, s string) { r.Queue = s }))
	addAll(biLabelCases(biEnqueue, "dedup_id", 5, func(r *coordv1.EnqueueRequest, s string) { r.DedupId = s }))
	addAll(biWaitCases(biEnqueue, "delay", 168*time.Hour, func(r *coordv1.EnqueueRequest, d *durationpb.Duration) { r.Delay = d }))
	add(
		biEnqueue.bad("payload=256KiB+1", "payload", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.Payload = make([]byte, 256<<10+1) }),
		biEnqueue.bad("max_attempts=-1", "max_attempts", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.MaxAttempts = -1 }),
		biEnqueue.bad("max_attempts=MinInt32", "max_attempts", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.MaxAttempts = math.MinInt32 }),
		biEnqueue.bad("max_attempts=101", "max_attempts", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.MaxAttempts = 101 }),
		biEnqueue.bad("dedup_mode=7", "dedup_mode", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.DedupId, r.DedupMode = "d", 7 }),
		biEnqueue.bad("dedup_mode=-1", "dedup_mode", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.DedupId, r.DedupMode = "d", -1 }),
		biEnqueue.bad("dedup_mode=REPLACE without dedup_id", "dedup_mode", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.DedupId, r.DedupMode = "", coordv1.DedupMode_DEDUP_MODE_REPLACE
		}),
		biEnqueue.bad("priority=-1", "priority", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.Priority = -1 }),
		biEnqueue.bad("priority=10", "priority", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.Priority = 10 }),
		biEnqueue.bad("group=257 bytes", "group", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.Group = strings.Repeat("g", 257) }),
		biEnqueue.bad("group with a control character", "group", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.Group = "a\x00b" }),
		biEnqueue.bad("group with a bidi override", "group", func(_ *biFixture, r *coordv1.EnqueueRequest) { r.Group = "a\u202eb" }),
		biEnqueue.bad("delay and deliver_time", "delay", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.DeliverTime = timestamppb.New(time.Now().Add(time.Minute))
		}),
		biEnqueue.bad("delay=0s and deliver_time", "delay", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Delay, r.DeliverTime = biD(0), timestamppb.New(time.Now().Add(time.Minute))
		}),
		biEnqueue.bad("deliver_time beyond max_delay", "deliver_time", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Delay, r.DeliverTime = nil, timestamppb.New(time.Now().Add(168*time.Hour+time.Minute))
		}),
		biEnqueue.bad("deliver_time far beyond max_delay", "deliver_time", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Delay, r.DeliverTime = nil, timestamppb.New(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
		}),
		biEnqueue.bad("deliver_time invalid (nanos)", "deliver_time", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Delay, r.DeliverTime = nil, &timestamppb.Timestamp{Seconds: time.Now().Unix(), Nanos: -1}
		}),
		biEnqueue.bad("deliver_time invalid (year 10000)", "deliver_time", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Delay, r.DeliverTime = nil, &timestamppb.Timestamp{Seconds: 253402300800}
		}),
	)

	// Claim, from the queue with a ready message.
	addAll(biNameCases(biClaim, "queue", 1, func(r *coordv1.ClaimRequest, s string) { r.Queue = s }))
	add(
		biClaim.bad("max_messages=-1", "max_messages", func(_ *biFixture, r *coordv1.ClaimRequest) { r.MaxMessages = -1 }),
		biClaim.bad("max_messages=MinInt32", "max_messages", func(_ *biFixture, r *coordv1.ClaimRequest) { r.MaxMessages = math.MinInt32 }),
		biClaim.bad("max_messages=101", "max_messages", func(_ *biFixture, r *coordv1.ClaimRequest) { r.MaxMessages = 101 }),
	)
	addAll(biDurCases(biClaim, "visibility_timeout", 12*time.Hour, false, func(r *coordv1.ClaimRequest, d *durationpb.Duration) { r.VisibilityTimeout = d }))
	addAll(biWaitCases(biClaim, "wait", time.Minute, func(r *coordv1.ClaimRequest, d *durationpb.Duration) { r.Wait = d }))

	// Ack, Nack, Extend, of the live claim.
	addAll(biNameCases(biAck, "queue", 1, func(r *coordv1.AckRequest, s string) { r.Queue = s }))
	addAll(biNameCases(biNack, "queue", 1, func(r *coordv1.NackRequest, s string) { r.Queue = s }))
	addAll(biNameCases(biExtend, "queue", 1, func(r *coordv1.ExtendRequest, s string) { r.Queue = s }))
	for _, v := range biBadReceipts {
		add(
			biAck.bad("receipt="+v.name, "receipt", func(fx *biFixture, r *coordv1.AckRequest) { r.Receipt = v.v(fx.receipt) }),
			biNack.bad("receipt="+v.name, "receipt", func(fx *biFixture, r *coordv1.NackRequest) { r.Receipt = v.v(fx.receipt) }),
			biExtend.bad("receipt="+v.name, "receipt", func(fx *biFixture, r *coordv1.ExtendRequest) { r.Receipt = v.v(fx.receipt) }),
		)
	}
	// The list form names the entry; a receipt given twice is refused.
	for _, v := range biBadReceipts {
		add(biAck.bad("receipts[1]="+v.name, "receipts[1]", func(fx *biFixture, r *coordv1.AckRequest) {
			r.Receipt, r.Receipts = "", []string{fx.receipt, v.v(fx.receipt)}
		}))
	}
	add(biAck.bad("receipts repeated", "receipts[1]", func(fx *biFixture, r *coordv1.AckRequest) {
		r.Receipt, r.Receipts = "", []string{fx.receipt, fx.receipt}
	}))
	rawReceipt := biRawString(2, strings.Repeat("\xff", 72))
	add(
		biAck.bad("receipt=invalid UTF-8", "receipt", nil, rawReceipt),
		biNack.bad("receipt=invalid UTF-8", "receipt", nil, rawReceipt),
		biExtend.bad("receipt=invalid UTF-8", "receipt", nil, rawReceipt),
	)
	addAll(biWaitCases(biNack, "delay", 168*time.Hour, func(r *coordv1.NackRequest, d *durationpb.Duration) { r.Delay = d }))
	addAll(biDurCases(biExtend, "visibility_timeout", 12*time.Hour, true, func(r *coordv1.ExtendRequest, d *durationpb.Duration) { r.VisibilityTimeout = d }))

	// Stats.
	addAll(biNameCases(biStats, "queue", 1, func(r *coordv1.StatsRequest, s string) { r.Queue = s }))

	// CheckFence, of the held lock's fence.
	addAll(biNameCases(biCheckFence, "name", 1, func(r *coordv1.CheckFenceRequest, s string) { r.Name = s }))
	add(biCheckFence.bad("fence=0", "fence", func(_ *biFixture, r *coordv1.CheckFenceRequest) { r.Fence = 0 }))

	// KeepAlive's lock_delay, first and later requests.
	for _, rpc := range []biRPC[*coordv1.KeepAliveRequest]{biKeepAlive, biKeepAliveLater} {
		addAll(biWaitCases(rpc, "lock_delay", time.Minute, func(r *coordv1.KeepAliveRequest, d *durationpb.Duration) { r.LockDelay = d }))
	}

	// SemaphoreService.Acquire, of a fresh semaphore.
	addAll(biNameCases(biAcquire, "name", 1, func(r *coordv1.AcquireRequest, s string) { r.Name = s }))
	addAll(biLabelCases(biAcquire, "owner", 6, func(r *coordv1.AcquireRequest, s string) { r.Owner = s }))
	addAll(biDurCases(biAcquire, "ttl", time.Hour, false, func(r *coordv1.AcquireRequest, d *durationpb.Duration) { r.Ttl = d }))
	addAll(biDurCases(biAcquire, "max_hold", 24*time.Hour, false, func(r *coordv1.AcquireRequest, d *durationpb.Duration) { r.MaxHold = d }))
	addAll(biWaitCases(biAcquire, "wait", time.Minute, func(r *coordv1.AcquireRequest, d *durationpb.Duration) { r.Wait = d }))
	add(
		biAcquire.bad("limit=0", "limit", func(_ *biFixture, r *coordv1.AcquireRequest) { r.Limit = 0 }),
		biAcquire.bad("limit=-1", "limit", func(_ *biFixture, r *coordv1.AcquireRequest) { r.Limit = -1 }),
		biAcquire.bad("limit=MinInt32", "limit", func(_ *biFixture, r *coordv1.AcquireRequest) { r.Limit = math.MinInt32 }),
		biAcquire.bad("limit=1001 above semaphore.max_limit", "limit", func(_ *biFixture, r *coordv1.AcquireRequest) { r.Limit = 1001 }),
		biAcquire.bad("limit=MaxInt32", "limit", func(_ *biFixture, r *coordv1.AcquireRequest) { r.Limit = math.MaxInt32 }),
		// The held semaphore's own name with a bad limit: refused as input,
		// not as a LIMIT_MISMATCH.
		biAcquire.bad("limit=0 on a held semaphore", "limit", func(fx *biFixture, r *coordv1.AcquireRequest) { r.Name, r.Limit = fx.semName, 0 }),
	)
	for _, v := range biBadTokens {
		if v.name == "empty" {
			continue // empty is a plain lease
		}
		add(biAcquire.bad("session_id="+v.name, "session_id", func(fx *biFixture, r *coordv1.AcquireRequest) { r.SessionId, r.Ttl = v.v(fx.session), nil }))
	}
	add(
		biAcquire.bad("session_id=invalid UTF-8", "session_id", func(_ *biFixture, r *coordv1.AcquireRequest) { r.Ttl = nil }, biRawString(4, strings.Repeat("\xff", 32))),
		biAcquire.bad("session-bound with ttl=10s", "ttl", func(fx *biFixture, r *coordv1.AcquireRequest) { r.SessionId = fx.session }),
		biAcquire.bad("session-bound with ttl=0s", "ttl", func(fx *biFixture, r *coordv1.AcquireRequest) { r.SessionId, r.Ttl = fx.session, biD(0) }),
	)

	// SemaphoreService.Renew, Release, GetSemaphore, of the held permit.
	addAll(biNameCases(biSemRenew, "name", 1, func(r *coordv1.SemaphoreServiceRenewRequest, s string) { r.Name = s }))
	addAll(biTokenCases(biSemRenew, "token", 2, func(fx *biFixture) string { return fx.semToken }, func(r *coordv1.SemaphoreServiceRenewRequest, s string) { r.Token = s }))
	addAll(biDurCases(biSemRenew, "ttl", time.Hour, true, func(r *coordv1.SemaphoreServiceRenewRequest, d *durationpb.Duration) { r.Ttl = d }))
	addAll(biNameCases(biSemRelease, "name", 1, func(r *coordv1.SemaphoreServiceReleaseRequest, s string) { r.Name = s }))
	addAll(biTokenCases(biSemRelease, "token", 2, func(fx *biFixture) string { return fx.semToken }, func(r *coordv1.SemaphoreServiceReleaseRequest, s string) { r.Token = s }))
	addAll(biNameCases(biGetSemaphore, "name", 1, func(r *coordv1.GetSemaphoreRequest, s string) { r.Name = s }))

	// ElectionService.Campaign, of a fresh election, by the live session.
	addAll(biNameCases(biCampaign, "name", 1, func(r *coordv1.CampaignRequest, s string) { r.Name = s }))
	addAll(biWaitCases(biCampaign, "wait", time.Minute, func(r *coordv1.CampaignRequest, d *durationpb.Duration) { r.Wait = d }))
	add(
		biCampaign.bad("value empty", "value", func(_ *biFixture, r *coordv1.CampaignRequest) { r.Value = nil }),
		biCampaign.bad("value=4097 bytes", "value", func(_ *biFixture, r *coordv1.CampaignRequest) { r.Value = make([]byte, 4097) }),
		biCampaign.bad("session_id empty", "session_id", func(_ *biFixture, r *coordv1.CampaignRequest) { r.SessionId = "" }),
		biCampaign.bad("session_id=invalid UTF-8", "session_id", nil, biRawString(3, strings.Repeat("\xff", 32))),
	)
	for _, v := range biBadTokens {
		if v.name == "empty" {
			continue // above: required
		}
		add(biCampaign.bad("session_id="+v.name, "session_id", func(fx *biFixture, r *coordv1.CampaignRequest) { r.SessionId = v.v(fx.session) }))
	}

	// ElectionService.Proclaim, Resign, of the led election; Leader, Observe.
	addAll(biNameCases(biProclaim, "name", 1, func(r *coordv1.ProclaimRequest, s string) { r.Name = s }))
	addAll(biTokenCases(biProclaim, "token", 2, func(fx *biFixture) string { return fx.electToken }, func(r *coordv1.ProclaimRequest, s string) { r.Token = s }))
	add(
		biProclaim.bad("value empty", "value", func(_ *biFixture, r *coordv1.ProclaimRequest) { r.Value = nil }),
		biProclaim.bad("value=4097 bytes", "value", func(_ *biFixture, r *coordv1.ProclaimRequest) { r.Value = make([]byte, 4097) }),
		biProclaim.bad("value=1MiB", "value", func(_ *biFixture, r *coordv1.ProclaimRequest) { r.Value = make([]byte, 1<<20) }),
	)
	addAll(biNameCases(biResign, "name", 1, func(r *coordv1.ResignRequest, s string) { r.Name = s }))
	addAll(biTokenCases(biResign, "token", 2, func(fx *biFixture) string { return fx.electToken }, func(r *coordv1.ResignRequest, s string) { r.Token = s }))
	addAll(biNameCases(biLeader, "name", 1, func(r *coordv1.LeaderRequest, s string) { r.Name = s }))
	addAll(biNameCases(biObserve, "name", 1, func(r *coordv1.ObserveRequest, s string) { r.Name = s }))

	// Redrive, of the queue with a dead letter.
	addAll(biNameCases(biRedrive, "queue", 1, func(r *coordv1.RedriveRequest, s string) { r.Queue = s }))
	add(
		biRedrive.bad("max_messages=-1", "max_messages", func(_ *biFixture, r *coordv1.RedriveRequest) { r.MaxMessages = -1 }),
		biRedrive.bad("max_messages=MinInt32", "max_messages", func(_ *biFixture, r *coordv1.RedriveRequest) { r.MaxMessages = math.MinInt32 }),
		biRedrive.bad("max_messages=1001", "max_messages", func(_ *biFixture, r *coordv1.RedriveRequest) { r.MaxMessages = 1001 }),
		biRedrive.bad("max_messages and message_ids", "max_messages", func(fx *biFixture, r *coordv1.RedriveRequest) { r.MessageIds = []string{fx.deadID} }),
		biRedrive.bad("message_ids[1] not an ID", "message_ids[1]", func(fx *biFixture, r *coordv1.RedriveRequest) {
			r.MaxMessages, r.MessageIds = 0, []string{fx.deadID, "nope"}
		}),
		biRedrive.bad("message_ids[0] upper case", "message_ids[0]", func(fx *biFixture, r *coordv1.RedriveRequest) {
			r.MaxMessages, r.MessageIds = 0, []string{strings.ToUpper(fx.deadID)}
		}),
		biRedrive.bad("message_ids[0] a receipt", "message_ids[0]", func(fx *biFixture, r *coordv1.RedriveRequest) {
			r.MaxMessages, r.MessageIds = 0, []string{fx.receipt}
		}),
		biRedrive.bad("1001 message_ids", "message_ids", func(fx *biFixture, r *coordv1.RedriveRequest) {
			r.MaxMessages, r.MessageIds = 0, slices.Repeat([]string{fx.deadID}, 1001)
		}),
	)

	// ListDeadLetters and PurgeDeadLetters, of the queue with a dead letter.
	addAll(biNameCases(biListDead, "queue", 1, func(r *coordv1.ListDeadLettersRequest, s string) { r.Queue = s }))
	addAll(biNameCases(biPurgeDead, "queue", 1, func(r *coordv1.PurgeDeadLettersRequest, s string) { r.Queue = s }))
	add(
		biListDead.bad("page_size=-1", "page_size", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PageSize = -1 }),
		biListDead.bad("page_size=501", "page_size", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PageSize = 501 }),
		biListDead.bad("page_size=MinInt32", "page_size", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PageSize = math.MinInt32 }),
		biListDead.bad("preview_bytes=-1", "preview_bytes", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PreviewBytes = -1 }),
		biListDead.bad("preview_bytes=4097", "preview_bytes", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PreviewBytes = 4097 }),
		biListDead.bad("page_token garbage", "page_token", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PageToken = "garbage!" }),
		biListDead.bad("page_token base64 of garbage", "page_token", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PageToken = "Z2FyYmFnZQ" }),
		biListDead.bad("page_token long", "page_token", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PageToken = strings.Repeat("A", 4000) }),
		biListDead.bad("page_token invalid UTF-8", "page_token", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) {}, biRawString(3, "\xff")),
		biPurgeDead.bad("max_messages=-1", "max_messages", func(_ *biFixture, r *coordv1.PurgeDeadLettersRequest) { r.MaxMessages = -1 }),
		biPurgeDead.bad("max_messages=10001", "max_messages", func(_ *biFixture, r *coordv1.PurgeDeadLettersRequest) { r.MaxMessages = 10001 }),
		biPurgeDead.bad("max_messages=MinInt32", "max_messages", func(_ *biFixture, r *coordv1.PurgeDeadLettersRequest) { r.MaxMessages = math.MinInt32 }),
	)

	// Runtime policies.
	for _, v := range append(slices.Clone(biBadNames), biBadUTF8...) {
		add(biPutPolicy.bad("policy.name="+v.name, "policy.name", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.Name = v.v }))
	}
	addAll(biNameCases(biDeletePolicy, "name", 1, func(r *coordv1.DeletePolicyRequest, s string) { r.Name = s }))
	limits := func(ls ...*coordv1.NamedLimit) func(*biFixture, *coordv1.PutPolicyRequest) {
		return func(_ *biFixture, r *coordv1.PutPolicyRequest) {
			r.Policy.Limit, r.Policy.LocalQuota, r.Policy.Limits = nil, 0, ls
		}
	}
	named := func(name string, l *coordv1.Limit) *coordv1.NamedLimit {
		return &coordv1.NamedLimit{Name: name, Limit: l}
	}
	second, day := biLimit(biToken, 10, time.Second, 0), biLimit(biFixed, 1000, 24*time.Hour, 0)
	nine := make([]*coordv1.NamedLimit, 9)
	for i := range nine {
		nine[i] = named(fmt.Sprint("l", i), biLimit(biFixed, int64(i+1), time.Hour, 0))
	}
	add(
		biPutPolicy.bad("policy unset", "policy", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy = nil }),
		biPutPolicy.bad("no limit", "policy.limit.algorithm", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.Limit, r.Policy.LocalQuota = nil, 0 }),
		biPutPolicy.bad("policy.limit.period unset", "policy.limit.period", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.Limit.Period = nil }),
		biPutPolicy.bad("policy.limit.period=-1s", "policy.limit.period", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.Limit.Period = biD(-time.Second) }),
		biPutPolicy.bad("policy.limit.period=169h", "policy.limit.period", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.Limit.Period = biD(169 * time.Hour) }),
		biPutPolicy.bad("policy.limit.limit=0", "policy.limit.limit", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.Limit.Limit = 0 }),
		biPutPolicy.bad("policy.limit.limit=3 a second on a bucket", "policy.limit.limit", func(_ *biFixture, r *coordv1.PutPolicyRequest) {
			r.Policy.Limit.Limit, r.Policy.Limit.Burst, r.Policy.LocalQuota = 3, 0, 0
		}),
		biPutPolicy.bad("policy.limit.algorithm=99", "policy.limit.algorithm", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.Limit.Algorithm = 99 }),
		biPutPolicy.bad("policy.limit.burst on a fixed window", "policy.limit.burst", func(_ *biFixture, r *coordv1.PutPolicyRequest) {
			r.Policy.Limit, r.Policy.LocalQuota = biLimit(biFixed, 10, time.Second, 5), 0
		}),
		biPutPolicy.bad("policy.limit and policy.limits", "policy.limits", func(_ *biFixture, r *coordv1.PutPolicyRequest) {
			r.Policy.LocalQuota, r.Policy.Limits = 0, []*coordv1.NamedLimit{named("day", day)}
		}),
		biPutPolicy.bad("9 limits", "policy.limits", limits(nine...)),
		biPutPolicy.bad("policy.limits[1].name empty", "policy.limits[1].name", limits(named("second", second), named("", day))),
		biPutPolicy.bad("policy.limits[1].name twice", "policy.limits[1].name", limits(named("second", second), named("second", day))),
		biPutPolicy.bad("policy.limits[1] the same limit", "policy.limits[1]", limits(named("second", second), named("again", second))),
		biPutPolicy.bad("policy.limits[0].limit unset", "policy.limits[0].limit.algorithm", limits(named("second", nil))),
		biPutPolicy.bad("policy.limits[1].limit.period unset", "policy.limits[1].limit.period", limits(named("second", second), named("day", &coordv1.Limit{Algorithm: biFixed, Limit: 1}))),
		biPutPolicy.bad("policy.limits[1].limit.limit=0", "policy.limits[1].limit.limit", limits(named("second", second), named("day", biLimit(biFixed, 0, time.Hour, 0)))),
		biPutPolicy.bad("policy.local_quota=-1", "policy.local_quota", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.LocalQuota = -1 }),
		biPutPolicy.bad("policy.local_quota above the capacity", "policy.local_quota", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.LocalQuota = 21 }),
		biPutPolicy.bad("policy.local_quota on a sliding log", "policy.local_quota", func(_ *biFixture, r *coordv1.PutPolicyRequest) {
			r.Policy.Limit = biLimit(biLog, 10, time.Second, 0)
		}),
		biPutPolicy.bad("policy.local_quota with several limits", "policy.local_quota", func(_ *biFixture, r *coordv1.PutPolicyRequest) {
			r.Policy.Limit, r.Policy.Limits = nil, []*coordv1.NamedLimit{named("second", second), named("day", day)}
		}),
		biPutPolicy.bad("policy.on_store_failure=99", "policy.on_store_failure", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.OnStoreFailure = 99 }),
		biPutPolicy.bad("policy.on_store_failure=-1", "policy.on_store_failure", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.OnStoreFailure = -1 }),
	)

	// Schedules.
	addAll(biNameCases(biPutSchedule, "queue", 1, func(r *coordv1.PutScheduleRequest, s string) { r.Queue = s }))
	addAll(biNameCases(biPutSchedule, "name", 2, func(r *coordv1.PutScheduleRequest, s string) { r.Name = s }))
	addAll(biLabelCases(biPutSchedule, "group", 6, func(r *coordv1.PutScheduleRequest, s string) { r.Group = s }))
	addAll(biNameCases(biDeleteSchedule, "queue", 1, func(r *coordv1.DeleteScheduleRequest, s string) { r.Queue = s }))
	addAll(biNameCases(biDeleteSchedule, "name", 2, func(r *coordv1.DeleteScheduleRequest, s string) { r.Name = s }))
	addAll(biLabelCases(biListSchedules, "queue", 1, func(r *coordv1.ListSchedulesRequest, s string) { r.Queue = s }))
	for _, v := range []struct{ name, spec, tz, field string }{
		{"spec empty", "", "", "spec"},
		{"spec 4 fields", "* * * *", "", "spec"},
		{"spec 7 fields", "0 0 0 * * * *", "", "spec"},
		{"spec minute 60", "60 * * * *", "", "spec"},
		{"spec never fires", "0 0 30 2 *", "", "spec"},
		{"spec @every 500ms", "@every 500ms", "", "spec"},
		{"spec @every 1.5s", "@every 1500ms", "", "spec"},
		{"spec @every -1s", "@every -1s", "", "spec"},
		{"spec @reboot", "@reboot", "", "spec"},
		{"spec with CRON_TZ", "CRON_TZ=UTC 0 3 * * *", "", "spec"},
		{"spec 257 bytes", "0 3 * * *" + strings.Repeat(" ", 248), "", "spec"},
		{"spec with a control character", "0 3 * * *\x00", "", "spec"},
		{"time_zone unknown", "0 3 * * *", "Mars/Olympus", "time_zone"},
		{"time_zone Local", "0 3 * * *", "Local", "time_zone"},
		{"time_zone a path", "0 3 * * *", "../../etc/passwd", "time_zone"},
	} {
		add(biPutSchedule.bad(v.name, v.field, func(_ *biFixture, r *coordv1.PutScheduleRequest) { r.Spec, r.TimeZone = v.spec, v.tz }))
	}
	add(
		biPutSchedule.bad("priority=10", "priority", func(_ *biFixture, r *coordv1.PutScheduleRequest) { r.Priority = 10 }),
		biPutSchedule.bad("priority=-1", "priority", func(_ *biFixture, r *coordv1.PutScheduleRequest) { r.Priority = -1 }),
		biPutSchedule.bad("max_attempts=101", "max_attempts", func(_ *biFixture, r *coordv1.PutScheduleRequest) { r.MaxAttempts = 101 }),
		biPutSchedule.bad("max_attempts=-1", "max_attempts", func(_ *biFixture, r *coordv1.PutScheduleRequest) { r.MaxAttempts = -1 }),
		biPutSchedule.bad("payload over queue.max_payload_bytes", "payload", func(_ *biFixture, r *coordv1.PutScheduleRequest) { r.Payload = make([]byte, 256<<10+1) }),
	)

	// The queue's settings.
	addAll(biNameCases(biPause, "queue", 1, func(r *coordv1.PauseQueueRequest, s string) { r.Queue = s }))
	addAll(biNameCases(biResume, "queue", 1, func(r *coordv1.ResumeQueueRequest, s string) { r.Queue = s }))
	addAll(biNameCases(biQueueSettings, "queue", 1, func(r *coordv1.GetQueueSettingsRequest, s string) { r.Queue = s }))
	addAll(biNameCases(biConfigure, "queue", 1, func(r *coordv1.ConfigureQueueRequest, s string) { r.Queue = s }))
	add(
		biConfigure.bad("max_in_flight=-1", "max_in_flight", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.MaxInFlight = -1 }),
		biConfigure.bad("max_in_flight=1000001", "max_in_flight", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.MaxInFlight = 1_000_001 }),
		biConfigure.bad("claim_rate.limit=0", "claim_rate.limit", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.ClaimRate.Limit = 0 }),
		biConfigure.bad("claim_rate.limit=-1", "claim_rate.limit", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.ClaimRate.Limit = -1 }),
		biConfigure.bad("claim_rate.limit=1000001", "claim_rate.limit", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.ClaimRate.Limit = 1_000_001 }),
		biConfigure.bad("claim_rate.period unset", "claim_rate.period", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.ClaimRate.Period = nil }),
		biConfigure.bad("claim_rate.period=1µs", "claim_rate.period", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.ClaimRate.Period = biD(time.Microsecond) }),
		biConfigure.bad("claim_rate.period=25h", "claim_rate.period", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.ClaimRate.Period = biD(25 * time.Hour) }),
		biConfigure.bad("claim_rate.period=-1s", "claim_rate.period", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.ClaimRate.Period = biD(-time.Second) }),
	)
	return cs
}

// biAllRPCs are every RPC of the services, from their generated
// descriptors, so that an RPC added later fails the coverage checks below
// until it has cases. An RPC is named by its service and method
// ("SemaphoreService.Renew"), since two services may have methods of one
// name; a case's rpc starts with that name.
var biAllRPCs = func() []string {
	var rpcs []string
	for _, sd := range []grpc.ServiceDesc{coordv1.LockService_ServiceDesc, coordv1.SessionService_ServiceDesc,
		coordv1.RateLimitService_ServiceDesc, coordv1.IdempotencyService_ServiceDesc, coordv1.QueueService_ServiceDesc,
		coordv1.SemaphoreService_ServiceDesc, coordv1.ElectionService_ServiceDesc} {
		svc := sd.ServiceName[strings.LastIndex(sd.ServiceName, ".")+1:]
		for _, m := range sd.Methods {
			rpcs = append(rpcs, svc+"."+m.MethodName)
		}
		for _, st := range sd.Streams {
			rpcs = append(rpcs, svc+"."+st.StreamName)
		}
	}
	return rpcs
}()

// TestBadInput sends each malformed request and checks that it is refused
// with INVALID_ARGUMENT naming the field, and that nothing changed.
func TestBadInput(t *testing.T) {
	cases := biCases()
	seen, covered := map[string]bool{}, map[string]bool{}
	for _, tc := range cases {
		name := tc.rpc + "/" + tc.name
		if seen[name] {
			t.Fatalf("duplicate case %s", name)
		}
		seen[name] = true
		covered[strings.SplitN(tc.rpc, "/", 2)[0]] = true
	}
	if len(biAllRPCs) < 26 {
		t.Fatalf("the service descriptors list %d RPCs: %q", len(biAllRPCs), biAllRPCs)
	}
	for _, rpc := range biAllRPCs {
		if !covered[rpc] && !biNoInput[rpc] {
			t.Errorf("no case for %s", rpc)
		}
	}
	t.Logf("%d cases", len(cases))
	for _, tc := range cases {
		t.Run(tc.rpc+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			var f *storetest.Faulty
			h := newHarness(t, biPolicies, withFaulty(&f))
			fx := biSetup(t, h, f)
			before := biSnapshot(t, h, fx)
			calls := f.CallCounts()
			resp, err := tc.call(ctx(t), h, fx)
			if made := f.CallsSince(calls); len(made) > 0 {
				t.Errorf("the request reached the store: %s", strings.Join(made, ", "))
			}
			after := biSnapshot(t, h, fx)
			if after != before {
				t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
			}
			if err == nil {
				t.Fatalf("accepted: got response %v, want INVALID_ARGUMENT naming %q", resp, tc.field)
			}
			if st := status.Convert(err); st.Code() != codes.InvalidArgument {
				t.Logf("details of the %v status: %v", st.Code(), st.Details())
			}
			st := wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
			var info *errdetails.ErrorInfo
			var br *errdetails.BadRequest
			for _, d := range st.Details() {
				switch d := d.(type) {
				case *errdetails.ErrorInfo:
					info = d
				case *errdetails.BadRequest:
					br = d
				}
			}
			if got := info.GetMetadata()["field"]; got != tc.field {
				t.Errorf("ErrorInfo metadata field = %q, want %q (message %q)", got, tc.field, st.Message())
			}
			if v := br.GetFieldViolations(); len(v) != 1 || v[0].GetField() != tc.field || v[0].GetDescription() == "" {
				t.Errorf("BadRequest %v, want one violation of field %q, described", br, tc.field)
			}
			if !strings.Contains(st.Message(), tc.field) {
				t.Errorf("status message %q does not name the field %q", st.Message(), tc.field)
			}
		})
	}
}

// biVisible are the RPCs whose base request changes what biSnapshot sees.
var biVisible = map[string]bool{
	"LockService.Lock": true, "LockService.Renew": true, "LockService.Release": true,
	"SessionService.KeepAlive/later": true, "RateLimitService.Allow": true, "RateLimitService.PutPolicy": true,
	"IdempotencyService.BeginIdempotent": true, "IdempotencyService.Finish": true, "IdempotencyService.ExtendIdempotent": true,
	"QueueService.Enqueue": true, "QueueService.Claim": true, "QueueService.Ack": true, "QueueService.Nack": true,
	"QueueService.Redrive": true, "QueueService.PauseQueue": true, "QueueService.ConfigureQueue": true, "QueueService.PutSchedule": true,
	"SemaphoreService.Acquire": true, "SemaphoreService.Renew": true, "SemaphoreService.Release": true,
	"ElectionService.Campaign": true, "ElectionService.Proclaim": true, "ElectionService.Resign": true,
}

// TestBadInputControl sends each RPC's base request, and some at the bounds,
// all fields valid: each must succeed, so that TestBadInput's cases fail only
// for the field they break.
func TestBadInputControl(t *testing.T) {
	long := strings.Repeat("n", 256)
	biGetLockFree := biGetLock
	biGetLockFree.ok = nil // a free lock is not held
	biCheckFenceAny := biCheckFence
	biCheckFenceAny.ok = nil // another fence is not current
	biGetSemaphoreFree := biGetSemaphore
	biGetSemaphoreFree.ok = nil
	biLeaderAny, biObserveAny := biLeader, biObserve
	biLeaderAny.ok, biObserveAny.ok = nil, nil
	cases := []biCase{
		biLock.control("base", nil),
		biLock.control("at the bounds", func(_ *biFixture, r *coordv1.LockRequest) {
			r.Name, r.Owner, r.Ttl, r.MaxHold, r.Wait = long, long, biD(time.Hour), biD(24*time.Hour), biD(time.Minute)
		}),
		biLock.control("at the lower bounds", func(_ *biFixture, r *coordv1.LockRequest) {
			r.Name, r.Owner, r.Ttl, r.MaxHold, r.Wait = "x", "", biD(time.Millisecond), biD(time.Millisecond), biD(0)
		}),
		biLock.control("unicode name", func(_ *biFixture, r *coordv1.LockRequest) { r.Name = "verrou-é-ロック" }),
		biLock.control("right-to-left script, combining mark", func(_ *biFixture, r *coordv1.LockRequest) {
			r.Name, r.Owner = "قفل-e\u0301", "مالك"
		}),
		biLock.control("defaults", func(_ *biFixture, r *coordv1.LockRequest) { r.Ttl, r.MaxHold, r.Wait, r.Owner = nil, nil, nil, "" }),
		biLock.control("session-bound", func(fx *biFixture, r *coordv1.LockRequest) { r.SessionId, r.Ttl = fx.session, nil }),
		biLock.control("raw codec", nil, biRawString(1, "raw-name")),
		biRenew.control("base", nil),
		biRenew.control("ttl=max", func(_ *biFixture, r *coordv1.RenewRequest) { r.Ttl = biD(time.Hour) }),
		biLock.control("shared", func(_ *biFixture, r *coordv1.LockRequest) { r.Shared = true }),
		biLock.control("shared, session-bound", func(fx *biFixture, r *coordv1.LockRequest) { r.Shared, r.SessionId, r.Ttl = true, fx.session, nil }),
		biRelease.control("base", nil),
		biGetLock.control("base", nil),
		biGetLockFree.control("256-byte name", func(_ *biFixture, r *coordv1.GetLockRequest) { r.Name = long }),
		biKeepAlive.control("base", nil),
		biKeepAlive.control("resume", func(fx *biFixture, r *coordv1.KeepAliveRequest) { r.SessionId = fx.session }),
		biKeepAlive.control("lock_delay=1m", func(_ *biFixture, r *coordv1.KeepAliveRequest) { r.LockDelay = biD(time.Minute) }),
		biKeepAlive.control("lock_delay=0s", func(_ *biFixture, r *coordv1.KeepAliveRequest) { r.LockDelay = biD(0) }),
		biKeepAliveLater.control("base", nil),
		biKeepAliveLater.control("lock_delay=1m", func(_ *biFixture, r *coordv1.KeepAliveRequest) { r.LockDelay = biD(time.Minute) }),
		biKeepAliveLater.control("ttl=5m", func(_ *biFixture, r *coordv1.KeepAliveRequest) { r.Ttl = biD(5 * time.Minute) }),
		biAllow.control("base", nil),
		biAllow.control("cost=0 means 1", func(_ *biFixture, r *coordv1.AllowRequest) { r.Cost = 0 }),
		biAllow.control("256-byte key", func(_ *biFixture, r *coordv1.AllowRequest) { r.Key = long }),
		biAllow.control("policy cost=limit", func(_ *biFixture, r *coordv1.AllowRequest) { r.Policy, r.Cost = "fixed", 10 }),
		biAllow.control("policy cost=bucket capacity", func(_ *biFixture, r *coordv1.AllowRequest) { r.Policy, r.Cost = "bucket", 5 }),
		biAllow.control("inline token bucket cost=burst", func(fx *biFixture, r *coordv1.AllowRequest) {
			biInline(biLimit(biToken, 10, time.Hour, 3))(fx, r)
			r.Cost = 3
		}),
		biAllow.control("inline leaky bucket", biInline(biLimit(biLeaky, 10, time.Hour, 0))),
		biAllow.control("inline fixed window", biInline(biLimit(biFixed, 1_000_000_000, 168*time.Hour, 0))),
		biAllow.control("inline sliding window", biInline(biLimit(biSliding, 10, time.Millisecond, 0))),
		biAllow.control("inline fixed window, 1e6 units per µs", biInline(biLimit(biFixed, 1_000_000_000, time.Millisecond, 0))),
		biAllow.control("inline token bucket, one unit per µs", biInline(biLimit(biToken, 1000, time.Millisecond, 0))),
		biAllow.control("inline sliding log", biInline(biLimit(biLog, 1000, time.Hour, 0))),
		biBegin.control("base", nil),
		biBegin.control("at the bounds", func(_ *biFixture, r *coordv1.BeginIdempotentRequest) {
			r.Key, r.Fingerprint, r.ProcessingTtl, r.Wait = long, long, biD(time.Hour), biD(time.Minute)
		}),
		biBegin.control("hex SHA-256 fingerprint", func(_ *biFixture, r *coordv1.BeginIdempotentRequest) {
			r.Fingerprint = fmt.Sprintf("%x", []byte(biRawDigest))
		}),
		biBegin.control("base64 SHA-256 fingerprint", func(_ *biFixture, r *coordv1.BeginIdempotentRequest) {
			r.Fingerprint = base64.StdEncoding.EncodeToString([]byte(biRawDigest))
		}),
		biFinish.control("base", nil),
		biFinish.control("result=1MiB", func(_ *biFixture, r *coordv1.FinishRequest) { r.Result = make([]byte, 1<<20) }),
		biFinish.control("failure.message=4096 bytes", func(_ *biFixture, r *coordv1.FinishRequest) {
			r.Result, r.Failure, r.ResultTtl = nil, &coordv1.Failure{Message: strings.Repeat("m", 4096)}, biD(168*time.Hour)
		}),
		biFinish.control("failure.message with line breaks", func(_ *biFixture, r *coordv1.FinishRequest) {
			r.Result, r.Failure = nil, &coordv1.Failure{Message: "declined\n\tby the bank"}
		}),
		biFinish.control("empty result", func(_ *biFixture, r *coordv1.FinishRequest) { r.Result, r.ResultTtl = nil, nil }),
		biExtendIdem.control("base", nil),
		biExtendIdem.control("processing_ttl=max", func(_ *biFixture, r *coordv1.ExtendIdempotentRequest) { r.ProcessingTtl = biD(time.Hour) }),
		biEnqueue.control("base", nil),
		biEnqueue.control("at the bounds", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Queue, r.Payload, r.Delay, r.DedupId, r.MaxAttempts = long, make([]byte, 256<<10), biD(168*time.Hour), long, 100
		}),
		biEnqueue.control("deliver_time", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Delay, r.DeliverTime = nil, timestamppb.New(time.Now().Add(time.Hour))
		}),
		biEnqueue.control("past deliver_time", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Delay, r.DeliverTime = nil, timestamppb.New(time.Now().Add(-time.Hour))
		}),
		biEnqueue.control("dedup_mode REPLACE", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.DedupId, r.DedupMode = "debounced", coordv1.DedupMode_DEDUP_MODE_REPLACE
		}),
		biEnqueue.control("dedup_mode KEEP_FIRST", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.DedupId, r.DedupMode = "kept", coordv1.DedupMode_DEDUP_MODE_KEEP_FIRST
		}),
		biEnqueue.control("defaults", func(_ *biFixture, r *coordv1.EnqueueRequest) {
			r.Delay, r.DedupId, r.MaxAttempts, r.Payload = nil, "", 0, nil
		}),
		biClaim.control("base", nil),
		biClaim.control("at the bounds", func(_ *biFixture, r *coordv1.ClaimRequest) {
			r.MaxMessages, r.VisibilityTimeout, r.Wait = 100, biD(12*time.Hour), biD(time.Minute)
		}),
		biClaim.control("defaults", func(_ *biFixture, r *coordv1.ClaimRequest) { r.MaxMessages, r.VisibilityTimeout, r.Wait = 0, nil, nil }),
		biAck.control("base", nil),
		biPause.control("base", nil),
		biResume.control("base", nil),
		biConfigure.control("base", nil),
		biConfigure.control("no caps", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) { r.MaxInFlight, r.ClaimRate = 0, nil }),
		biConfigure.control("at the bounds", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) {
			r.MaxInFlight, r.ClaimRate = 1_000_000, &coordv1.ClaimRate{Limit: 1_000_000, Period: biD(24 * time.Hour)}
		}),
		biConfigure.control("at the lower bounds", func(_ *biFixture, r *coordv1.ConfigureQueueRequest) {
			r.MaxInFlight, r.ClaimRate = 1, &coordv1.ClaimRate{Limit: 1, Period: biD(time.Millisecond)}
		}),
		biQueueSettings.control("base", nil),
		biPutSchedule.control("base", nil),
		biPutSchedule.control("six fields, UTC, defaults", func(_ *biFixture, r *coordv1.PutScheduleRequest) {
			r.Spec, r.TimeZone, r.Group, r.Priority, r.MaxAttempts, r.Payload = "30 0 3 * * MON-FRI", "", "", 0, 0, nil
		}),
		biPutSchedule.control("@every 1s", func(_ *biFixture, r *coordv1.PutScheduleRequest) { r.Spec = "@every 1s" }),
		biPutSchedule.control("@hourly", func(_ *biFixture, r *coordv1.PutScheduleRequest) { r.Spec = "@hourly" }),
		biDeleteSchedule.control("base", nil),
		biListSchedules.control("base", nil),
		biPutPolicy.control("base", nil),
		biPutPolicy.control("several limits, at the bounds", func(_ *biFixture, r *coordv1.PutPolicyRequest) {
			r.Policy.Name, r.Policy.Limit, r.Policy.LocalQuota, r.Policy.Shadow = long, nil, 0, true
			r.Policy.OnStoreFailure = coordv1.OnStoreFailure_ON_STORE_FAILURE_FAIL_OPEN
			for i := range 8 {
				r.Policy.Limits = append(r.Policy.Limits, &coordv1.NamedLimit{Name: fmt.Sprint(long[:255], i), Limit: biLimit(biFixed, int64(i+1), time.Hour, 0)})
			}
		}),
		biPutPolicy.control("unspecified on_store_failure", func(_ *biFixture, r *coordv1.PutPolicyRequest) { r.Policy.OnStoreFailure = 0 }),
		biDeletePolicy.control("base", nil),
		biListPolicies.control("base", nil),
		biListSchedules.control("every queue", func(_ *biFixture, r *coordv1.ListSchedulesRequest) { r.Queue = "" }),
		biNack.control("base", nil),
		biNack.control("delay=0s", func(_ *biFixture, r *coordv1.NackRequest) { r.Delay = biD(0) }),
		biNack.control("delay=max", func(_ *biFixture, r *coordv1.NackRequest) { r.Delay = biD(168 * time.Hour) }),
		biNack.control("delay unset", func(_ *biFixture, r *coordv1.NackRequest) { r.Delay = nil }),
		biExtend.control("base", nil),
		biExtend.control("visibility_timeout=max", func(_ *biFixture, r *coordv1.ExtendRequest) { r.VisibilityTimeout = biD(12 * time.Hour) }),
		biStats.control("base", nil),
		biStats.control("256-byte queue", func(_ *biFixture, r *coordv1.StatsRequest) { r.Queue = long }),
		biCheckFence.control("base", nil),
		biCheckFenceAny.control("another fence", func(_ *biFixture, r *coordv1.CheckFenceRequest) { r.Fence = math.MaxUint64 }),
		biCheckFenceAny.control("free lock, 256-byte name", func(_ *biFixture, r *coordv1.CheckFenceRequest) { r.Name = long }),
		biAcquire.control("base", nil),
		biAcquire.control("at the bounds", func(_ *biFixture, r *coordv1.AcquireRequest) {
			r.Name, r.Owner, r.Limit, r.Ttl, r.MaxHold, r.Wait = long, long, 1000, biD(time.Hour), biD(24*time.Hour), biD(time.Minute)
		}),
		biAcquire.control("at the lower bounds", func(_ *biFixture, r *coordv1.AcquireRequest) {
			r.Name, r.Owner, r.Limit, r.Ttl, r.MaxHold, r.Wait = "x", "", 1, biD(time.Millisecond), biD(time.Millisecond), biD(0)
		}),
		biAcquire.control("defaults", func(_ *biFixture, r *coordv1.AcquireRequest) { r.Ttl, r.MaxHold, r.Wait, r.Owner = nil, nil, nil, "" }),
		biAcquire.control("session-bound", func(fx *biFixture, r *coordv1.AcquireRequest) { r.SessionId, r.Ttl = fx.session, nil }),
		biAcquire.control("the held semaphore, its limit", func(fx *biFixture, r *coordv1.AcquireRequest) { r.Name, r.Limit = fx.semName, 2 }),
		biSemRenew.control("base", nil),
		biSemRenew.control("ttl=max", func(_ *biFixture, r *coordv1.SemaphoreServiceRenewRequest) { r.Ttl = biD(time.Hour) }),
		biSemRelease.control("base", nil),
		biGetSemaphore.control("base", nil),
		biGetSemaphoreFree.control("256-byte name", func(_ *biFixture, r *coordv1.GetSemaphoreRequest) { r.Name = long }),
		biCampaign.control("base", nil),
		biCampaign.control("at the bounds", func(_ *biFixture, r *coordv1.CampaignRequest) {
			r.Name, r.Value, r.Wait = long, make([]byte, 4096), biD(time.Minute)
		}),
		biCampaign.control("at the lower bounds", func(_ *biFixture, r *coordv1.CampaignRequest) { r.Name, r.Value, r.Wait = "x", []byte{0}, nil }),
		biProclaim.control("base", nil),
		biProclaim.control("value=4096 bytes", func(_ *biFixture, r *coordv1.ProclaimRequest) { r.Value = make([]byte, 4096) }),
		biResign.control("base", nil),
		biLeader.control("base", nil),
		biLeaderAny.control("no leader, 256-byte name", func(_ *biFixture, r *coordv1.LeaderRequest) { r.Name = long }),
		biObserve.control("base", nil),
		biObserveAny.control("no leader, 256-byte name", func(_ *biFixture, r *coordv1.ObserveRequest) { r.Name = long }),
		biRedrive.control("base", nil),
		biRedrive.control("max_messages=1000", func(_ *biFixture, r *coordv1.RedriveRequest) { r.MaxMessages = 1000 }),
		biRedrive.control("max_messages=0 means default", func(_ *biFixture, r *coordv1.RedriveRequest) { r.MaxMessages = 0 }),
		biRedrive.control("message_ids", func(fx *biFixture, r *coordv1.RedriveRequest) {
			r.MaxMessages, r.MessageIds = 0, []string{strings.Repeat("0", 32), fx.deadID, fx.deadID}
		}),
		biRedrive.control("1000 message_ids", func(fx *biFixture, r *coordv1.RedriveRequest) {
			r.MaxMessages, r.MessageIds = 0, slices.Repeat([]string{fx.deadID}, 1000)
		}),
		biListDead.control("base", nil),
		biListDead.control("defaults", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PageSize, r.PreviewBytes = 0, 0 }),
		biListDead.control("at the bounds", func(_ *biFixture, r *coordv1.ListDeadLettersRequest) { r.PageSize, r.PreviewBytes = 500, 4096 }),
		biPurgeDead.control("base", nil),
		biPurgeDead.control("defaults", func(_ *biFixture, r *coordv1.PurgeDeadLettersRequest) { r.MaxMessages = 0 }),
		biPurgeDead.control("at the bound", func(_ *biFixture, r *coordv1.PurgeDeadLettersRequest) { r.MaxMessages = 10000 }),
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[strings.SplitN(tc.rpc, "/", 2)[0]] = true
		t.Run(tc.rpc+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			var f *storetest.Faulty
			h := newHarness(t, biPolicies, withFaulty(&f))
			fx := biSetup(t, h, f)
			before := biSnapshot(t, h, fx)
			calls := f.CallCounts()
			if resp, err := tc.call(ctx(t), h, fx); err != nil {
				t.Fatalf("valid request failed: %v (response %v)", err, resp)
			}
			// TestBadInput's "no store call" means something: the store
			// calls of a valid request are counted.
			if len(f.CallsSince(calls)) == 0 {
				t.Errorf("a valid %s made no store call that the count saw", tc.rpc)
			}
			// The snapshot sees what a base request that was wrongly
			// accepted would have changed (some of it only through the
			// memory store's record count).
			if after := biSnapshot(t, h, fx); h.store != nil && tc.name == "base" && biVisible[tc.rpc] && after == before {
				t.Errorf("state unchanged by a valid %s: the snapshot would not see it accepted (%+v)", tc.rpc, after)
			}
		})
	}
	for _, rpc := range biAllRPCs {
		if !covered[rpc] {
			t.Errorf("no control case for %s", rpc)
		}
	}
}

// A wait over limits.max_wait names its bound in the ErrorInfo's metadata
// "limit" (a Duration's JSON), for clients that wait again in rounds under
// it; other invalid fields carry none.
func TestWaitOverLimitNamesTheLimit(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		wait time.Duration
		want string
	}{{61 * time.Second, "60s"}, {-time.Second, ""}} {
		_, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "l", Ttl: dur(time.Minute), Wait: dur(tc.wait)})
		st := wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				if got, ok := info.GetMetadata()["limit"]; got != tc.want || ok != (tc.want != "") {
					t.Errorf("Lock(wait %v): metadata limit = %q (set: %v), want %q", tc.wait, got, ok, tc.want)
				}
			}
		}
	}
}
