package server

// Fuzz targets of the request validation, end to end: each builds requests
// from fuzzed fields (strings of any bytes, integers, Durations and
// Timestamps as raw seconds/nanos pairs, valid or not), calls the handlers
// directly — the fast path: no gRPC, a fresh memory store on a fake clock per
// input, so that an input always does the same — and maps their errors as
// the server's interceptor does (errorMapper.toStatus). The properties:
//
//   - no panic;
//   - the outcome is OK (with a response that marshals), or INVALID_ARGUMENT
//     with an ErrorInfo (reason INVALID_ARGUMENT, metadata "field" one of the
//     RPC's fields) and a BadRequest naming the same field, or
//     FAILED_PRECONDITION or RESOURCE_EXHAUSTED: never INTERNAL, UNKNOWN or
//     anything else;
//   - the outcome is INVALID_ARGUMENT if and only if the request breaks a
//     rule, by a naive statement of the rules written here (names,
//     durations, timestamps, counts, sizes, capacities; independent of
//     internal/validate; tokens and receipts by token.Valid and
//     store.ParseReceipt, which have fuzz targets of their own): no valid
//     request refused, no invalid one reaching the store, where it would get
//     OK or a FAILED_PRECONDITION about state;
//   - a request that succeeds gets a sane response, and what it stored
//     reads back (a result, a payload, a lock's owner).
//
// The drain channel is closed, which makes every wait a single attempt, so a
// valid wait is accepted without the input waiting for it.
//
// Seeds: testdata/fuzz/<FuzzName>.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/idem"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
)

// fuzzEpoch is where every input's fake clock starts.
var fuzzEpoch = time.Unix(1_800_000_000, 0)

// fuzzPolicies are the named rate-limit policies the Allow target may use.
var fuzzPolicies = map[string]limiter.Policy{
	"log":    {Limit: store.Limit{Algorithm: store.SlidingLog, Limit: 10, Period: time.Hour}},
	"fixed":  {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Hour}},
	"window": {Limit: store.Limit{Algorithm: store.SlidingWindow, Limit: 3, Period: time.Second}},
	"bucket": {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: time.Minute, Burst: 5}, FailOpen: true},
	"leaky":  {Limit: store.Limit{Algorithm: store.LeakyBucket, Limit: 2, Period: time.Second}, Shadow: true},
}

// fuzzMetrics is shared by every input of a process: counting has no effect
// on the answers, and a registry per input would dominate the cost.
var fuzzMetrics = sync.OnceValue(func() *metrics.Metrics { return metrics.New(prometheus.NewRegistry()) })

// fuzzEnv is one input's server: the handlers over a fresh memory store.
type fuzzEnv struct {
	t        *testing.T
	ctx      context.Context
	clk      *clock.Fake
	svc      Services
	locks    *lockServer
	sessions *sessionServer
	limits   *rateLimitServer
	idem     *idempotencyServer
	queues   *queueServer
	errs     errorMapper
}

func newFuzzEnv(t *testing.T) *fuzzEnv {
	clk := clock.NewFake(fuzzEpoch)
	st := memory.New(memory.Options{Clock: clk, SweepInterval: time.Hour})
	drain := make(chan struct{})
	close(drain)
	cfg := DefaultConfig()
	cfg.Policies = fuzzPolicies
	svc, err := NewServices(st, clk, cfg, drain)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		_ = st.Close()
	})
	m := fuzzMetrics()
	return &fuzzEnv{
		t: t, ctx: ctx, clk: clk, svc: svc,
		locks: &lockServer{svc: svc.Locks, metrics: m},
		// A stream ends on a drain: its own is never closed.
		sessions: &sessionServer{svc: svc.Sessions, metrics: m},
		limits:   &rateLimitServer{svc: svc.Limiter, metrics: m},
		idem:     &idempotencyServer{svc: svc.Idem, metrics: m},
		queues:   &queueServer{svc: svc.Queues, metrics: m},
		errs:     errorMapper{log: slog.New(slog.DiscardHandler), metrics: m},
	}
}

// check applies the properties every answer must have, and returns its code.
// fields are the RPC's fields that an INVALID_ARGUMENT may name.
func (e *fuzzEnv) check(method string, resp proto.Message, err error, fields ...string) codes.Code {
	e.t.Helper()
	if err == nil {
		if resp == nil || !resp.ProtoReflect().IsValid() {
			e.t.Fatalf("%s: no error and no response", method)
		}
		if _, err := proto.Marshal(resp); err != nil {
			e.t.Fatalf("%s: the response does not marshal: %v", method, err)
		}
		return codes.OK
	}
	st, ok := status.FromError(e.errs.toStatus(e.ctx, method, err))
	if !ok {
		e.t.Fatalf("%s: %v is no status", method, err)
	}
	switch st.Code() {
	case codes.InvalidArgument:
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
		if info == nil || info.GetReason() != reasonInvalidArgument || info.GetDomain() != ErrorDomain {
			e.t.Fatalf("%s: INVALID_ARGUMENT (%s) without a coordd INVALID_ARGUMENT ErrorInfo: %v", method, st.Message(), info)
		}
		field := info.GetMetadata()["field"]
		if field == "" || !slices.Contains(fields, field) {
			e.t.Fatalf("%s: INVALID_ARGUMENT (%s) names field %q; want one of %q", method, st.Message(), field, fields)
		}
		if br == nil || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != field ||
			br.GetFieldViolations()[0].GetDescription() == "" {
			e.t.Fatalf("%s: INVALID_ARGUMENT (%s): BadRequest %v does not describe field %q", method, st.Message(), br, field)
		}
	case codes.FailedPrecondition, codes.ResourceExhausted:
	default:
		e.t.Fatalf("%s: %v (%s), want OK, INVALID_ARGUMENT, FAILED_PRECONDITION or RESOURCE_EXHAUSTED; the handler returned %v",
			method, st.Code(), st.Message(), err)
	}
	return st.Code()
}

// must fails the input with msg unless ok: for what a successful call implies.
func (e *fuzzEnv) must(ok bool, method, format string, args ...any) {
	e.t.Helper()
	if !ok {
		e.t.Fatalf(method+" succeeded, but "+format, args...)
	}
}

// agree checks code, the outcome of a call whose request the naive rules
// say is valid or not, against them: INVALID_ARGUMENT if and only if
// invalid. It returns code.
func (e *fuzzEnv) agree(method string, code codes.Code, err error, valid bool, req any) codes.Code {
	e.t.Helper()
	switch {
	case valid && code == codes.InvalidArgument:
		e.t.Fatalf("%s refused a valid request: %v\n\trequest %v", method, err, req)
	case !valid && code != codes.InvalidArgument:
		e.t.Fatalf("%s answered %v (%v) to a request the rules say is invalid:\n\t%v", method, code, err, req)
	}
	return code
}

// dur is a Duration field: unset, or the raw pair (valid or not).
func dur(set bool, secs int64, nanos int32) *durationpb.Duration {
	if !set {
		return nil
	}
	return &durationpb.Duration{Seconds: secs, Nanos: nanos}
}

// ts is a Timestamp field: unset, or the raw pair (valid or not).
func ts(set bool, secs int64, nanos int32) *timestamppb.Timestamp {
	if !set {
		return nil
	}
	return &timestamppb.Timestamp{Seconds: secs, Nanos: nanos}
}

// naiveDur is a Duration's value by the rules of duration.proto, saturated
// to time.Duration's range as AsDuration does; ok is false if it is no valid
// Duration (seconds beyond ±10000 years, nanos beyond ±999999999, or signs
// that differ).
func naiveDur(d *durationpb.Duration) (time.Duration, bool) {
	s, n := d.GetSeconds(), int64(d.GetNanos())
	if s < -315_576_000_000 || s > 315_576_000_000 || n <= -1e9 || n >= 1e9 || (s > 0 && n < 0) || (s < 0 && n > 0) {
		return 0, false
	}
	v := new(big.Int).Mul(big.NewInt(s), big.NewInt(1e9))
	v.Add(v, big.NewInt(n))
	switch {
	case v.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64, true
	case v.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64, true
	}
	return time.Duration(v.Int64()), true
}

// inRange: d is unset, or valid and within [lo, hi].
func inRange(d *durationpb.Duration, lo, hi time.Duration) bool {
	if d == nil {
		return true
	}
	v, ok := naiveDur(d)
	return ok && v >= lo && v <= hi
}

// naiveName: 1 to max bytes of valid UTF-8 without control characters
// (C0, DEL, C1) or format characters (Unicode Cf: bidirectional controls,
// zero-width characters, ...); optional allows "".
func naiveName(s string, max int, optional bool) bool {
	if (s == "" && !optional) || len(s) > max || string([]rune(s)) != s {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

func FuzzDurationField(f *testing.F) {
	f.Fuzz(func(t *testing.T, set bool, secs int64, nanos int32) {
		d := dur(set, secs, nanos)
		v, valid := naiveDur(d)
		check := func(name string, got time.Duration, err error, ok bool) {
			t.Helper()
			var fe *validate.FieldError
			switch {
			case ok && (err != nil || got != v):
				t.Fatalf("%s(%v) = %v, %v; want %v", name, d, got, err, v)
			case !ok && (!errors.As(err, &fe) || fe.Field != "x" || fe.Reason == ""):
				t.Fatalf("%s(%v) = %v, %v; want a *FieldError for x", name, d, got, err)
			}
		}
		got, err := positive("x", d)
		check("positive", got, err, d == nil || (valid && v > 0))
		got, err = nonNegative("x", d)
		check("nonNegative", got, err, d == nil || (valid && v >= 0))
		got, err = required("x", d)
		check("required", got, err, d != nil && valid && v > 0)
	})
}

func FuzzLockRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, name, owner, sessionID string, realSession bool,
		ttlSet bool, ttlS int64, ttlN int32, waitSet bool, waitS int64, waitN int32,
		holdSet bool, holdS int64, holdN int32, twice bool) {
		e := newFuzzEnv(t)
		fields := []string{"name", "owner", "session_id", "ttl", "wait", "max_hold"}
		if realSession {
			st, err := e.svc.Sessions.Open(e.ctx, DefaultNamespace, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			sessionID = st.ID
		}
		req := &coordv1.LockRequest{Name: name, Owner: owner, SessionId: sessionID,
			Ttl: dur(ttlSet, ttlS, ttlN), Wait: dur(waitSet, waitS, waitN), MaxHold: dur(holdSet, holdS, holdN)}
		cfg := lock.DefaultConfig()
		validName := naiveName(name, cfg.MaxNameBytes, false)
		validTTL := req.Ttl != nil && inRange(req.Ttl, time.Millisecond, cfg.MaxTTL) // for Renew: required

		// Before any lock exists, the fuzzed name and token (the session_id
		// string) through GetLock, Renew and Release: valid input finds the
		// lock free; invalid input is INVALID_ARGUMENT, never an answer of
		// the store (OK, or LOCK_NOT_HELD) about a name or token it was
		// given malformed.
		gr, err := e.locks.GetLock(e.ctx, &coordv1.GetLockRequest{Name: name})
		if e.agree("GetLock", e.check("GetLock", gr, err, "name"), err, validName, name) == codes.OK {
			e.must(!gr.GetHeld() && gr.GetFence() == 0 && gr.GetOwner() == "", "GetLock", "name %q before any Lock: %v", name, gr)
		}
		renew := &coordv1.RenewRequest{Name: name, Token: sessionID, Ttl: req.GetTtl()}
		rr, err := e.locks.Renew(e.ctx, renew)
		code := e.agree("Renew", e.check("Renew", rr, err, "name", "token", "ttl"), err, validName && token.Valid(sessionID) && validTTL, renew)
		e.must(code != codes.OK, "Renew", "of a lock nobody holds: %v", rr)
		rel, err := e.locks.Release(e.ctx, &coordv1.ReleaseRequest{Name: name, Token: sessionID})
		if e.agree("Release", e.check("Release", rel, err, "name", "token"), err, validName && token.Valid(sessionID), name+" "+sessionID) == codes.OK {
			e.must(!rel.GetReleased(), "Release", "name %q, token %q, before any Lock: %v", name, sessionID, rel)
		}

		valid := validName && naiveName(owner, cfg.MaxNameBytes, true) &&
			(sessionID == "" || (token.Valid(sessionID) && req.Ttl == nil)) &&
			inRange(req.Ttl, time.Millisecond, cfg.MaxTTL) && inRange(req.Wait, 0, cfg.MaxWait) &&
			inRange(req.MaxHold, time.Millisecond, cfg.HoldLimit)
		tok := sessionID // what Release is given: a token held, or the fuzzed string
		for i := 0; i < 1+btoi(twice); i++ {
			resp, err := e.locks.Lock(e.ctx, req)
			code := e.agree("Lock", e.check("Lock", resp, err, fields...), err, valid, req)
			if code == codes.FailedPrecondition && (sessionID == "" || realSession) {
				// Only SESSION_NOT_FOUND: a well-formed session_id of no session.
				t.Fatalf("Lock(%v): %v", req, err)
			}
			if code != codes.OK {
				return
			}
			if !resp.GetAcquired() {
				e.must(i > 0 && resp.GetToken() == "", "Lock", "a free lock was not acquired: %v", resp)
				continue
			}
			if i > 0 && realSession {
				// The session asked again for the lock it holds: its grant, at once.
				e.must(resp.GetAlreadyHeld() && resp.GetToken() == tok, "Lock", "again by its session: %v, want its grant (token %s)", resp, tok)
				continue
			}
			e.must(i == 0 && token.Valid(resp.GetToken()) && resp.GetFence() > 0 && !resp.GetAlreadyHeld(), "Lock", "response %v", resp)
			tok = resp.GetToken()

			// The lock's other calls, with its token and the same durations.
			renew := &coordv1.RenewRequest{Name: name, Token: resp.GetToken(), Ttl: req.GetTtl()}
			rr, err := e.locks.Renew(e.ctx, renew)
			code = e.check("Renew", rr, err, "name", "token", "ttl")
			switch {
			case sessionID != "":
				// Session-bound: its ttl is unset, so INVALID_ARGUMENT.
				e.agree("Renew", code, err, false, renew)
			default:
				e.agree("Renew", code, err, validTTL, renew)
				e.must(code != codes.FailedPrecondition, "Renew", "the holder's renewal: %v", err)
			}
			gr, err := e.locks.GetLock(e.ctx, &coordv1.GetLockRequest{Name: name})
			if e.check("GetLock", gr, err, "name") != codes.OK {
				t.Fatalf("GetLock(%q) of a held lock: %v", name, err)
			}
			e.must(gr.GetHeld() && gr.GetOwner() == owner && gr.GetSessionBound() == (req.GetSessionId() != "") && gr.GetFence() == resp.GetFence(),
				"GetLock", "%v after Lock %v", gr, req)
		}
		rel, err = e.locks.Release(e.ctx, &coordv1.ReleaseRequest{Name: name, Token: tok})
		if e.agree("Release", e.check("Release", rel, err, "name", "token"), err, validName && token.Valid(tok), name+" "+tok) == codes.OK {
			e.must(rel.GetReleased() == (tok != sessionID), "Release", "name %q, token %q: %v", name, tok, rel)
		}
	})
}

// naiveCapacity is the most one call may cost under l: its limit, or a
// bucket's burst; a token bucket's burst defaults to its limit, a leaky
// bucket's to 1.
func naiveCapacity(l store.Limit) int64 {
	switch {
	case l.Algorithm != store.TokenBucket && l.Algorithm != store.LeakyBucket:
		return l.Limit
	case l.Burst > 0:
		return l.Burst
	case l.Algorithm == store.TokenBucket:
		return l.Limit
	}
	return 1
}

// naiveBucketRefills: a token or leaky bucket of capacity c refills from
// empty within max, at one unit per period/limit (whole µs: a rate the store
// cannot represent exactly is refused). Only a burst above the limit is held
// to it.
func naiveBucketRefills(c, limit int64, period, max time.Duration) bool {
	interval := new(big.Int).Div(big.NewInt(period.Microseconds()), big.NewInt(limit))
	refill := new(big.Int).Mul(big.NewInt(c), interval)
	return refill.Cmp(big.NewInt(max.Microseconds())) <= 0
}

func FuzzAllowRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, policy string, limitSet bool, alg int32, limit int64,
		periodSet bool, periodS int64, periodN int32, burst, cost int64, peek bool, calls uint8, advance int64) {
		e := newFuzzEnv(t)
		fields := []string{"key", "policy", "limit", "limit.algorithm", "limit.limit", "limit.period", "limit.burst", "cost"}
		req := &coordv1.AllowRequest{Key: key, Policy: policy, Cost: cost, Peek: peek}
		if limitSet {
			req.Limit = &coordv1.Limit{Algorithm: coordv1.Algorithm(alg), Limit: limit, Period: dur(periodSet, periodS, periodN), Burst: burst}
		}
		cfg := limiter.DefaultConfig()

		// The rules: a key; a configured policy or else a valid inline
		// limit; a cost (0: 1) within the limit's capacity.
		var l store.Limit
		validLimit := false
		if p, ok := fuzzPolicies[policy]; ok && !limitSet {
			l, validLimit = p.Limit, true
		} else if policy == "" && limitSet {
			period, _ := naiveDur(req.Limit.GetPeriod())
			l = store.Limit{Algorithm: store.Algorithm(alg), Limit: limit, Period: period, Burst: burst}
			bucket := alg == 4 || alg == 5
			maxLimit := cfg.MaxLimit
			if alg == 3 {
				maxLimit = cfg.MaxLogLimit
			}
			validLimit = alg >= 1 && alg <= 5 && limit >= 1 && limit <= maxLimit &&
				req.Limit.Period != nil && inRange(req.Limit.Period, time.Millisecond, cfg.MaxPeriod) &&
				period%time.Microsecond == 0 && (!bucket || period.Microseconds()%limit == 0) &&
				burst >= 0 && burst <= cfg.MaxLimit && (burst == 0 || bucket) &&
				(!bucket || burst <= limit || naiveBucketRefills(burst, limit, period, cfg.MaxPeriod))
		}
		capacity := naiveCapacity(l)
		valid := naiveName(key, cfg.MaxNameBytes, false) && validLimit && cost >= 0 && cost <= capacity

		var taken int64 // the cost of the calls allowed, peeks and shadow mode aside
		for i := 0; i <= int(calls%4); i++ {
			if i > 0 {
				e.clk.Advance(forward(advance))
			}
			resp, err := e.limits.Allow(e.ctx, req)
			if e.agree("Allow", e.check("Allow", resp, err, fields...), err, valid, req) != codes.OK {
				return
			}
			e.must(resp.GetLimit() == l.Limit && resp.GetRemaining() >= 0 && resp.GetRemaining() <= capacity &&
				resp.GetRetryAfter().AsDuration() >= 0 && resp.GetResetAfter().AsDuration() >= 0 &&
				(resp.GetAllowed() || resp.GetRetryAfter().AsDuration() > 0),
				"Allow", "call %d: response %v for limit %+v, cost %d (capacity %d)", i, resp, l, cost, capacity)

			// No algorithm allows more over a span of time than its capacity
			// and a limit per period started: span/T units after a full bucket
			// (T = P/L), L per window touched (the windows).
			if resp.GetAllowed() && !peek && !fuzzPolicies[policy].Shadow {
				taken += max(cost, 1)
			}
			span := e.clk.Now().Sub(fuzzEpoch)
			windows := int64((span + l.Period - 1) / l.Period)
			e.must(taken <= capacity+l.Limit*(windows+1), "Allow",
				"%d allowed in %v by limit %+v (capacity %d) in %d calls of cost %d", taken, span, l, capacity, i+1, cost)
		}
	})
}

func FuzzBeginIdempotentRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, fingerprint, fingerprint2 string,
		pttlSet bool, pttlS int64, pttlN int32, waitSet bool, waitS int64, waitN int32, advance int64) {
		e := newFuzzEnv(t)
		fields := []string{"key", "fingerprint", "processing_ttl", "wait"}
		cfg := idem.DefaultConfig()
		req := &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: fingerprint,
			ProcessingTtl: dur(pttlSet, pttlS, pttlN), Wait: dur(waitSet, waitS, waitN)}
		valid := func(fp string) bool {
			return naiveName(key, cfg.MaxNameBytes, false) && naiveName(fp, cfg.MaxFingerprintBytes, false) &&
				inRange(req.ProcessingTtl, time.Millisecond, cfg.MaxProcessingTTL) && inRange(req.Wait, 0, cfg.MaxWait)
		}
		resp, err := e.idem.BeginIdempotent(e.ctx, req)
		if e.agree("BeginIdempotent", e.check("BeginIdempotent", resp, err, fields...), err, valid(fingerprint), req) != codes.OK {
			return
		}
		e.must(resp.GetOutcome() == coordv1.Outcome_OUTCOME_EXECUTE && token.Valid(resp.GetOwnerToken()), "BeginIdempotent", "response %v on a new key", resp)

		// Again, maybe later, maybe with another fingerprint: in progress,
		// taken over, or a fingerprint mismatch (FAILED_PRECONDITION).
		e.clk.Advance(forward(advance))
		req2 := &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: fingerprint2, ProcessingTtl: req.ProcessingTtl, Wait: req.Wait}
		resp2, err := e.idem.BeginIdempotent(e.ctx, req2)
		code := e.agree("BeginIdempotent", e.check("BeginIdempotent", resp2, err, fields...), err, valid(fingerprint2), req2)
		if code == codes.FailedPrecondition {
			e.must(fingerprint2 != fingerprint, "BeginIdempotent", "the same fingerprint mismatched")
		}
		if code == codes.OK {
			e.must(fingerprint2 == fingerprint, "BeginIdempotent", "fingerprint %q matched %q", fingerprint2, fingerprint)
		}
	})
}

func FuzzFinishRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, ownerToken string, realOwner bool, result []byte, failureSet bool, message string, retryable bool,
		ttlSet bool, ttlS int64, ttlN int32, extSet bool, extS int64, extN int32) {
		e := newFuzzEnv(t)
		cfg := idem.DefaultConfig()
		validKey := naiveName(key, cfg.MaxNameBytes, false)
		if realOwner {
			b, err := e.idem.BeginIdempotent(e.ctx, &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: "fp"})
			if e.agree("BeginIdempotent", e.check("BeginIdempotent", b, err, "key", "fingerprint"), err, validKey, key) != codes.OK {
				return
			}
			ownerToken = b.GetOwnerToken()
		}
		validOwner := validKey && token.Valid(ownerToken)
		ext := &coordv1.ExtendIdempotentRequest{Key: key, OwnerToken: ownerToken, ProcessingTtl: dur(extSet, extS, extN)}
		er, err := e.idem.ExtendIdempotent(e.ctx, ext)
		code := e.agree("ExtendIdempotent", e.check("ExtendIdempotent", er, err, "key", "owner_token", "processing_ttl"), err,
			validOwner && ext.ProcessingTtl != nil && inRange(ext.ProcessingTtl, time.Millisecond, cfg.MaxProcessingTTL), ext)
		if (code == codes.OK) != realOwner && code != codes.InvalidArgument {
			t.Fatalf("ExtendIdempotent(%v) (the owner: %v): %v", ext, realOwner, err)
		}

		req := &coordv1.FinishRequest{Key: key, OwnerToken: ownerToken, Result: bytes.Clone(result), ResultTtl: dur(ttlSet, ttlS, ttlN)}
		if failureSet {
			req.Failure = &coordv1.Failure{Message: message, Retryable: retryable}
		}
		valid := validOwner && inRange(req.ResultTtl, time.Millisecond, cfg.MaxResultTTL) && len(result) <= cfg.MaxResultBytes &&
			(!failureSet || (len(result) == 0 && len(message) <= cfg.MaxFailureBytes && utf8.ValidString(message)))
		resp, err := e.idem.Finish(e.ctx, req)
		code = e.agree("Finish", e.check("Finish", resp, err, "key", "owner_token", "result", "failure", "failure.message", "result_ttl"), err, valid, req)
		if (code == codes.OK) != realOwner && code != codes.InvalidArgument {
			t.Fatalf("Finish(%v) (the owner: %v): %v", req, realOwner, err)
		}
		if code != codes.OK {
			return
		}
		e.must(resp.GetStored(), "Finish", "request %v: %v", req, resp)

		// The outcome reads back exactly.
		b, err := e.idem.BeginIdempotent(e.ctx, &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: "fp"})
		if e.check("BeginIdempotent", b, err, "key", "fingerprint") != codes.OK {
			t.Fatalf("BeginIdempotent after Finish: %v", err)
		}
		switch {
		case failureSet && retryable:
			e.must(b.GetOutcome() == coordv1.Outcome_OUTCOME_EXECUTE, "Finish", "after a retryable failure: %v", b)
		case failureSet:
			e.must(b.GetOutcome() == coordv1.Outcome_OUTCOME_FAILED && b.GetFailure().GetMessage() == message &&
				!b.GetFailure().GetRetryable(), "Finish", "failure %q read back as %v", message, b)
		default:
			e.must(b.GetOutcome() == coordv1.Outcome_OUTCOME_COMPLETED && bytes.Equal(b.GetResult(), result),
				"Finish", "result %q read back as %v", result, b)
		}
	})
}

func FuzzEnqueueRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, queueName string, payload []byte, delaySet bool, delayS int64, delayN int32,
		deliverSet bool, deliverS int64, deliverN int32, dedupID string, maxAttempts int32, twice bool) {
		e := newFuzzEnv(t)
		cfg := queue.DefaultConfig()
		fields := []string{"queue", "payload", "delay", "deliver_time", "dedup_id", "max_attempts"}
		req := &coordv1.EnqueueRequest{Queue: queueName, Payload: bytes.Clone(payload), Delay: dur(delaySet, delayS, delayN),
			DeliverTime: ts(deliverSet, deliverS, deliverN), DedupId: dedupID, MaxAttempts: maxAttempts}
		valid := naiveName(queueName, cfg.MaxNameBytes, false) && naiveName(dedupID, cfg.MaxNameBytes, true) &&
			len(payload) <= cfg.MaxPayloadBytes && inRange(req.Delay, 0, cfg.MaxDelay) && (req.Delay == nil || req.DeliverTime == nil) &&
			(req.DeliverTime == nil || (naiveTimestamp(req.DeliverTime) && req.DeliverTime.AsTime().Sub(fuzzEpoch) <= cfg.MaxDelay)) &&
			maxAttempts >= 0 && maxAttempts <= int32(cfg.MaxAttemptsLimit)
		var first string
		for i := 0; i < 1+btoi(twice); i++ {
			resp, err := e.queues.Enqueue(e.ctx, req)
			if e.agree("Enqueue", e.check("Enqueue", resp, err, fields...), err, valid, req) != codes.OK {
				return
			}
			e.must(token.Valid(resp.GetMessageId()) && resp.GetDuplicate() == (i > 0 && dedupID != "") &&
				(!resp.GetDuplicate() || resp.GetMessageId() == first) && !resp.GetDeliverTime().AsTime().Before(fuzzEpoch),
				"Enqueue", "call %d: response %v", i, resp)
			first = resp.GetMessageId()
		}
		st, err := e.queues.Stats(e.ctx, &coordv1.StatsRequest{Queue: queueName})
		if e.check("Stats", st, err, "queue") != codes.OK {
			t.Fatalf("Stats(%q) after Enqueue: %v", queueName, err)
		}
		n := 2 - btoi(!twice || dedupID != "")
		e.must(st.GetReady()+st.GetDelayed() == int64(n) && st.GetInFlight() == 0 && st.GetDead() == 0, "Stats", "%v after %d enqueues", st, n)
	})
}

// naiveTimestamp: a valid Timestamp by the rules of timestamp.proto, from
// 0001-01-01 to 9999-12-31 with nanos in [0, 1e9).
func naiveTimestamp(ts *timestamppb.Timestamp) bool {
	return ts.GetSeconds() >= -62_135_596_800 && ts.GetSeconds() <= 253_402_300_799 && ts.GetNanos() >= 0 && ts.GetNanos() < 1e9
}

func FuzzClaimRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, queueName string, maxMessages int32, visSet bool, visS int64, visN int32,
		waitSet bool, waitS int64, waitN int32, prefill uint8, payload []byte) {
		e := newFuzzEnv(t)
		cfg := queue.DefaultConfig()
		validQueue := naiveName(queueName, cfg.MaxNameBytes, false)
		n := 0 // messages enqueued
		// With one attempt each (prefill bit 2), a Nack makes a message dead.
		maxAttempts := int32(2 - btoi(prefill&4 != 0))
		for i := 0; i < int(prefill%4); i++ {
			r, err := e.queues.Enqueue(e.ctx, &coordv1.EnqueueRequest{Queue: queueName, Payload: payload, MaxAttempts: maxAttempts})
			if e.agree("Enqueue", e.check("Enqueue", r, err, "queue", "payload"), err, validQueue && len(payload) <= cfg.MaxPayloadBytes, queueName) != codes.OK {
				break
			}
			n++
		}
		st, err := e.queues.Stats(e.ctx, &coordv1.StatsRequest{Queue: queueName})
		if e.agree("Stats", e.check("Stats", st, err, "queue"), err, validQueue, queueName) == codes.OK {
			e.must(st.GetReady() == int64(n) && st.GetDelayed()+st.GetInFlight()+st.GetDead() == 0, "Stats", "%v after %d enqueues", st, n)
		}
		// Nothing is dead yet: a valid Redrive moves nothing.
		validRedrive := validQueue && maxMessages >= 0 && maxMessages <= 10*int32(cfg.MaxClaimMessages)
		redrive := &coordv1.RedriveRequest{Queue: queueName, MaxMessages: maxMessages}
		rd, err := e.queues.Redrive(e.ctx, redrive)
		if e.agree("Redrive", e.check("Redrive", rd, err, "queue", "max_messages"), err, validRedrive, redrive) == codes.OK {
			e.must(rd.GetMoved() == 0, "Redrive", "max_messages %d: %v", maxMessages, rd)
		}

		req := &coordv1.ClaimRequest{Queue: queueName, MaxMessages: maxMessages,
			VisibilityTimeout: dur(visSet, visS, visN), Wait: dur(waitSet, waitS, waitN)}
		valid := validQueue && maxMessages >= 0 && maxMessages <= int32(cfg.MaxClaimMessages) &&
			inRange(req.VisibilityTimeout, time.Millisecond, cfg.MaxVisibility) && inRange(req.Wait, 0, cfg.MaxWait)
		resp, err := e.queues.Claim(e.ctx, req)
		if e.agree("Claim", e.check("Claim", resp, err, "queue", "max_messages", "visibility_timeout", "wait"), err, valid, req) != codes.OK {
			return
		}
		e.must(len(resp.GetMessages()) == min(n, max(1, int(maxMessages))), "Claim", "%d messages of %d, max %d", len(resp.GetMessages()), n, maxMessages)
		for _, m := range resp.GetMessages() {
			_, attempt, ok := store.ParseReceipt(m.GetReceipt())
			e.must(ok && attempt == 1 && m.GetAttempt() == 1 && bytes.Equal(m.GetPayload(), payload) &&
				m.GetExpireTime().AsTime().After(fuzzEpoch), "Claim", "message %v", m)
		}
		// Nacked, the messages claimed are dead if they had one attempt, and
		// Redrive moves them back, up to max_messages.
		for _, m := range resp.GetMessages() {
			nr, err := e.queues.Nack(e.ctx, &coordv1.NackRequest{Queue: queueName, Receipt: m.GetReceipt()})
			e.must(err == nil && nr.GetDeadLettered() == (maxAttempts == 1), "Nack", "message %v: %v, %v", m, nr, err)
		}
		rd, err = e.queues.Redrive(e.ctx, redrive)
		if e.agree("Redrive", e.check("Redrive", rd, err, "queue", "max_messages"), err, validRedrive, redrive) == codes.OK {
			dead, limit := 0, int(maxMessages)
			if maxAttempts == 1 {
				dead = len(resp.GetMessages())
			}
			if limit == 0 {
				limit = cfg.MaxClaimMessages
			}
			e.must(rd.GetMoved() == int64(min(dead, limit)), "Redrive", "%d dead, max_messages %d: %v", dead, maxMessages, rd)
		}
	})
}

// FuzzReceiptRequest: Ack, Nack and Extend with fuzzed receipts (or the
// receipts of real claims), queue names and durations.
func FuzzReceiptRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, queueName, receipt string, realReceipt bool, op uint8, delaySet bool, delayS int64, delayN int32, more string) {
		e := newFuzzEnv(t)
		cfg := queue.DefaultConfig()
		var real []string
		if realReceipt {
			for i := 0; i < 2; i++ {
				_, err := e.queues.Enqueue(e.ctx, &coordv1.EnqueueRequest{Queue: queueName, MaxAttempts: 2})
				if err != nil {
					break
				}
			}
			c, err := e.queues.Claim(e.ctx, &coordv1.ClaimRequest{Queue: queueName, MaxMessages: 2})
			if err == nil {
				for _, m := range c.GetMessages() {
					real = append(real, m.GetReceipt())
				}
			}
			if len(real) > 0 {
				receipt = real[0]
			}
		}
		d := dur(delaySet, delayS, delayN)
		validReceipt := func(r string) bool { _, _, ok := store.ParseReceipt(r); return ok }
		validQueue := naiveName(queueName, cfg.MaxNameBytes, false)
		valid := validQueue && validReceipt(receipt)
		// A well-formed receipt of no live claim is RECEIPT_EXPIRED.
		live := func(code codes.Code, r string, what any) {
			t.Helper()
			if code != codes.InvalidArgument && (code == codes.OK) != slices.Contains(real, r) {
				t.Fatalf("%v for receipt %q (the real ones %q): %v", code, r, real, what)
			}
		}
		switch op % 4 {
		case 0:
			req := &coordv1.AckRequest{Queue: queueName, Receipt: receipt}
			resp, err := e.queues.Ack(e.ctx, req)
			code := e.agree("Ack", e.check("Ack", resp, err, "queue", "receipt", "receipts"), err, valid, req)
			live(code, receipt, resp)
			e.must(code != codes.OK || resp.GetAcked(), "Ack", "receipt %q: %v", receipt, resp)
		case 1:
			// Several receipts: the real ones, the fuzzed one, and those in
			// more (split at ','), duplicates included (refused: a receipt
			// given twice is INVALID_ARGUMENT naming the second).
			rs := append(slices.Clone(real), receipt)
			if more != "" {
				rs = append(rs, splitComma(more)...)
			}
			valid := validQueue && len(rs) <= cfg.MaxClaimMessages
			fields := []string{"queue", "receipts"}
			for i, r := range rs {
				valid = valid && validReceipt(r) && !slices.Contains(rs[:i], r)
				fields = append(fields, fmt.Sprintf("receipts[%d]", i))
			}
			req := &coordv1.AckRequest{Queue: queueName, Receipts: rs}
			resp, err := e.queues.Ack(e.ctx, req)
			if e.agree("Ack", e.check("Ack", resp, err, fields...), err, valid, req) == codes.OK {
				e.must(int(resp.GetAckedCount())+len(resp.GetExpiredReceipts()) == len(rs) &&
					int(resp.GetAckedCount()) <= len(real) && resp.GetAcked() == (len(resp.GetExpiredReceipts()) == 0),
					"Ack", "receipts %q (of which real %q): %v", rs, real, resp)
			}
		case 2:
			req := &coordv1.NackRequest{Queue: queueName, Receipt: receipt, Delay: d}
			resp, err := e.queues.Nack(e.ctx, req)
			code := e.agree("Nack", e.check("Nack", resp, err, "queue", "receipt", "delay"), err, valid && inRange(d, 0, cfg.MaxDelay), req)
			live(code, receipt, resp)
			e.must(code != codes.OK || !resp.GetDeadLettered(), "Nack", "receipt %q, delay %v: %v", receipt, d, resp)
		default:
			req := &coordv1.ExtendRequest{Queue: queueName, Receipt: receipt, VisibilityTimeout: d}
			resp, err := e.queues.Extend(e.ctx, req)
			code := e.agree("Extend", e.check("Extend", resp, err, "queue", "receipt", "visibility_timeout"), err,
				valid && d != nil && inRange(d, time.Millisecond, cfg.MaxVisibility), req)
			live(code, receipt, resp)
		}
	})
}

func splitComma(s string) []string {
	var out []string
	for len(out) < 200 {
		i := 0
		for i < len(s) && s[i] != ',' {
			i++
		}
		out = append(out, s[:i])
		if i == len(s) {
			break
		}
		s = s[i+1:]
	}
	return out
}

// fuzzStream is a KeepAlive stream that delivers reqs, then io.EOF.
type fuzzStream struct {
	grpc.ServerStream // unused; nil
	ctx               context.Context
	mu                sync.Mutex
	reqs              []*coordv1.KeepAliveRequest
	sent              []*coordv1.KeepAliveResponse
}

func (s *fuzzStream) Context() context.Context { return s.ctx }

func (s *fuzzStream) Recv() (*coordv1.KeepAliveRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return nil, io.EOF
	}
	r := s.reqs[0]
	s.reqs = s.reqs[1:]
	return r, nil
}

func (s *fuzzStream) Send(r *coordv1.KeepAliveResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, r)
	return nil
}

// FuzzKeepAliveRequest runs a KeepAlive stream of up to three requests: the
// first opens a session (or resumes the fuzzed one), the others name the
// stream's session, none, or another; each may set a TTL.
func FuzzKeepAliveRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, id string, msgs uint8, ttlSet bool, ttlS int64, ttlN int32, id2 string, same bool) {
		e := newFuzzEnv(t)
		cfg := session.DefaultConfig()
		n := 1 + int(msgs%3)
		stream := &fuzzStream{ctx: e.ctx}
		for i := 0; i < n; i++ {
			r := &coordv1.KeepAliveRequest{Ttl: dur(ttlSet && (i == 0 || msgs&4 != 0), ttlS, ttlN)}
			switch {
			case i == 0:
				r.SessionId = id
			case !same:
				r.SessionId = id2
			}
			stream.reqs = append(stream.reqs, r)
		}
		reqs := slices.Clone(stream.reqs)
		ctx, cancel := context.WithCancel(e.ctx)
		stream.ctx = ctx
		err := e.sessions.KeepAlive(stream)
		cancel()
		code := e.check("KeepAlive", &coordv1.KeepAliveResponse{}, err, "session_id", "ttl")

		// The stream ends at its first bad request: a bad TTL, a malformed
		// session_id to resume, or a later one naming another session
		// (INVALID_ARGUMENT); a well-formed one of no session (the store is
		// fresh: FAILED_PRECONDITION). Each request before it is answered.
		want, answered := codes.OK, n
	scan:
		for i, q := range reqs {
			switch {
			case !inRange(q.Ttl, cfg.MinTTL, cfg.MaxTTL) || (i == 0 && q.SessionId != "" && !token.Valid(q.SessionId)) || (i > 0 && q.SessionId != ""):
				want = codes.InvalidArgument
			case i == 0 && q.SessionId != "":
				want = codes.FailedPrecondition
			default:
				continue
			}
			answered = i
			break scan
		}
		if code != want {
			t.Fatalf("KeepAlive stream %v: %v (%v), want %v", reqs, code, err, want)
		}
		stream.mu.Lock()
		sent := stream.sent
		stream.mu.Unlock()
		if len(sent) != answered {
			t.Fatalf("KeepAlive stream %v: %d responses, want %d: %v", reqs, len(sent), answered, sent)
		}
		for i, r := range sent {
			q := reqs[i]
			e.must(token.Valid(r.GetSessionId()) && (i == 0 || r.GetSessionId() == sent[0].GetSessionId()) &&
				!r.GetExpired() && r.GetTtl().AsDuration() >= cfg.MinTTL && r.GetTtl().AsDuration() <= cfg.MaxTTL,
				"KeepAlive", "request %v answered %v", q, r)
		}
	})
}

// forward is a clock advance of 0 to 2h from any int64.
func forward(n int64) time.Duration { return time.Duration(uint64(n) % uint64(2*time.Hour)) }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
