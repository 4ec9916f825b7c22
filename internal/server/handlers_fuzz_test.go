package server

// Fuzz targets of the request handlers, end to end: each builds requests
// from fuzzed fields (strings of any bytes, integers, Durations and
// Timestamps as raw seconds/nanos pairs, valid or not), calls the handlers
// directly — the fast path: no gRPC, a fresh memory store on a fake clock per
// input, so that an input always does the same — and maps their errors as
// the server's interceptor does (errorMapper.toStatus). They check
// properties, not the validation rules themselves (those are stated once, in
// internal/validate and the handlers; TestBadInput has a case per rule):
//
//   - no panic;
//   - the outcome is OK (with a response that marshals), or INVALID_ARGUMENT
//     with an ErrorInfo (reason INVALID_ARGUMENT, metadata "field" one of the
//     RPC's fields) and a BadRequest naming the same field, or
//     FAILED_PRECONDITION or RESOURCE_EXHAUSTED: never INTERNAL, UNKNOWN or
//     anything else;
//   - an INVALID_ARGUMENT request made no store call (the store is wrapped
//     in a storetest.Faulty, which counts them);
//   - a request known to be valid is not refused INVALID_ARGUMENT: the seeds
//     marked valid, a request accepted once and made again unchanged, and
//     what an earlier call's acceptance implies (a lock's own token and TTL,
//     a queue that took a message, a receipt a Claim returned);
//   - a request that succeeds gets a sane response, and what it stored
//     reads back (a result, a payload, a lock's owner).
//
// The drain channel is closed, which makes every wait a single attempt, so a
// valid wait is accepted without the input waiting for it.
//
// Seeds: the table before each target (testdata/fuzz/<FuzzName> holds only
// what the fuzzer found).

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
	"strings"
	"sync"
	"testing"
	"time"

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
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
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
	"bucket": {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: time.Minute, Burst: 5}, OnStoreFailure: limiter.FailOpen},
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
	store    *storetest.Faulty // counts the store calls
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
	st := storetest.NewFaulty(memory.New(memory.Options{Clock: clk, SweepInterval: time.Hour}))
	drain, drainNow := context.WithCancel(context.Background())
	drainNow()
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
		t: t, ctx: ctx, clk: clk, store: st, svc: svc,
		locks: &lockServer{svc: svc.Locks, metrics: m},
		// A stream ends on a drain: its own is never done.
		sessions: &sessionServer{svc: svc.Sessions, metrics: m, drain: context.Background(),
			final: errorMapper{log: slog.New(slog.DiscardHandler), metrics: m}.keepAliveStatus},
		limits: &rateLimitServer{svc: svc.Limiter, metrics: m},
		idem:   &idempotencyServer{svc: svc.Idem, metrics: m},
		queues: &queueServer{svc: svc.Queues, metrics: m},
		errs:   errorMapper{log: slog.New(slog.DiscardHandler), metrics: m},
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

// fuzzCall makes one handler call, applies check to its answer, and checks
// that an INVALID_ARGUMENT made no store call. fields are the RPC's fields
// that an INVALID_ARGUMENT may name.
func fuzzCall[R proto.Message](e *fuzzEnv, method string, call func() (R, error), fields ...string) (R, codes.Code, error) {
	e.t.Helper()
	before := e.store.CallCounts()
	resp, err := call()
	code := e.check(method, resp, err, fields...)
	if made := e.store.CallsSince(before); code == codes.InvalidArgument && len(made) > 0 {
		e.t.Fatalf("%s: INVALID_ARGUMENT (%v) after the request reached the store: %s", method, err, strings.Join(made, ", "))
	}
	return resp, code, err
}

// accepted fails the input if a request known to be valid (why says how it
// is known) was refused INVALID_ARGUMENT.
func (e *fuzzEnv) accepted(known bool, why, method string, code codes.Code, err error, req any) {
	e.t.Helper()
	if known && code == codes.InvalidArgument {
		e.t.Fatalf("%s refused a valid request (%s): %v\n\trequest %v", method, why, err, req)
	}
}

// refused fails the input if a seed known to be invalid was not refused
// INVALID_ARGUMENT. Which field is wrong is TestBadInput's to say; here the
// seeds keep both directions of the rules honest without restating them.
func (e *fuzzEnv) refused(bad bool, method string, code codes.Code, err error, req any) {
	e.t.Helper()
	if bad && code != codes.InvalidArgument {
		e.t.Fatalf("%s accepted an invalid seed (%v, %v)\n\trequest %v", method, code, err, req)
	}
}

// fuzzSeed is one seed of a handler fuzz target.
type fuzzSeed struct {
	name  string // what it tries
	valid bool   // the target's main request is valid: never INVALID_ARGUMENT
	args  []any  // the fuzz function's arguments, in order
}

// addSeeds adds seeds to f, and returns the seedKeys of the valid ones and
// of the invalid ones.
func addSeeds(f *testing.F, seeds []fuzzSeed) (valid, invalid map[string]bool) {
	valid, invalid = make(map[string]bool), make(map[string]bool)
	for _, s := range seeds {
		f.Add(s.args...)
		if s.valid {
			valid[seedKey(s.args...)] = true
		} else {
			invalid[seedKey(s.args...)] = true
		}
	}
	return valid, invalid
}

// seedKey identifies a fuzz input by its arguments, each with its type.
func seedKey(args ...any) string {
	var b strings.Builder
	for _, a := range args {
		switch a := a.(type) {
		case string:
			fmt.Fprintf(&b, "string %q,", a)
		case []byte:
			fmt.Fprintf(&b, "[]byte %q,", a)
		default:
			fmt.Fprintf(&b, "%T %v,", a, a)
		}
	}
	return b.String()
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

func FuzzDurationField(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add(true, int64(43200), int32(0))                  // 12h
	f.Add(true, int64(43200), int32(1))                  // 12h_1ns
	f.Add(true, int64(604800), int32(0))                 // 168h
	f.Add(true, int64(604800), int32(1))                 // 168h_1ns
	f.Add(true, int64(3600), int32(0))                   // 1h
	f.Add(true, int64(3600), int32(1))                   // 1h_1ns
	f.Add(true, int64(60), int32(0))                     // 1m
	f.Add(true, int64(60), int32(1))                     // 1m_1ns
	f.Add(true, int64(0), int32(1000000))                // 1ms
	f.Add(true, int64(0), int32(1))                      // 1ns
	f.Add(true, int64(1), int32(0))                      // 1s
	f.Add(true, int64(86400), int32(0))                  // 24h
	f.Add(true, int64(86400), int32(1))                  // 24h_1ns
	f.Add(true, int64(300), int32(0))                    // 5m
	f.Add(true, int64(300), int32(1))                    // 5m_1ns
	f.Add(true, int64(0), int32(999999))                 // just_under_1ms
	f.Add(true, int64(315576000000), int32(999999999))   // max_valid
	f.Add(true, int64(9223372036), int32(854775807))     // maxint_duration
	f.Add(true, int64(9223372036), int32(854775808))     // maxint_plus_1ns
	f.Add(true, int64(9223372036854775807), int32(0))    // maxint_seconds
	f.Add(true, int64(-315576000000), int32(-999999999)) // min_valid
	f.Add(true, int64(-9223372036854775808), int32(0))   // minint_seconds
	f.Add(true, int64(0), int32(-1))                     // minus_1ns
	f.Add(true, int64(-1), int32(0))                     // minus_1s
	f.Add(true, int64(0), int32(1000000000))             // nanos_1e9
	f.Add(true, int64(0), int32(2147483647))             // nanos_max_int32
	f.Add(true, int64(0), int32(-1000000000))            // nanos_minus_1e9
	f.Add(true, int64(1), int32(-1))                     // nanos_sign_mismatch
	f.Add(true, int64(315576000001), int32(0))           // seconds_out_of_range
	f.Add(true, int64(-1), int32(1))                     // seconds_sign_mismatch
	f.Add(false, int64(-1), int32(0))                    // unset
	f.Add(true, int64(0), int32(0))                      // zero
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

var fuzzLockSeeds = []fuzzSeed{
	{"defaults", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"max_hold_12h", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(43200), int32(0), false}},
	{"max_hold_12h_1ns", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(43200), int32(1), false}},
	{"max_hold_168h", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(604800), int32(0), false}},
	{"max_hold_168h_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(604800), int32(1), false}},
	{"max_hold_1h", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(3600), int32(0), false}},
	{"max_hold_1h_1ns", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(3600), int32(1), false}},
	{"max_hold_1m", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(60), int32(0), false}},
	{"max_hold_1m_1ns", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(60), int32(1), false}},
	{"max_hold_1ms", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(1000000), false}},
	{"max_hold_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(1), false}},
	{"max_hold_1s", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(1), int32(0), false}},
	{"max_hold_24h", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(86400), int32(0), false}},
	{"max_hold_24h_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(86400), int32(1), false}},
	{"max_hold_5m", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(300), int32(0), false}},
	{"max_hold_5m_1ns", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(300), int32(1), false}},
	{"max_hold_just_under_1ms", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(999999), false}},
	{"max_hold_max_valid", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(315576000000), int32(999999999), false}},
	{"max_hold_maxint_duration", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(9223372036), int32(854775807), false}},
	{"max_hold_maxint_plus_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(9223372036), int32(854775808), false}},
	{"max_hold_maxint_seconds", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(9223372036854775807), int32(0), false}},
	{"max_hold_min_valid", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(-315576000000), int32(-999999999), false}},
	{"max_hold_minint_seconds", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(-9223372036854775808), int32(0), false}},
	{"max_hold_minus_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(-1), false}},
	{"max_hold_minus_1s", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(-1), int32(0), false}},
	{"max_hold_nanos_1e9", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(1000000000), false}},
	{"max_hold_nanos_max_int32", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(2147483647), false}},
	{"max_hold_nanos_minus_1e9", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(-1000000000), false}},
	{"max_hold_nanos_sign_mismatch", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(1), int32(-1), false}},
	{"max_hold_seconds_out_of_range", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(315576000001), int32(0), false}},
	{"max_hold_seconds_sign_mismatch", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(-1), int32(1), false}},
	{"max_hold_zero", false, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(0), false}},
	{"name_ascii", true, []any{"orders/42", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_braces", true, []any{"{l:x}}{", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_c1", false, []any{"\u0085", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_colon", true, []any{"ns:name", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_del", false, []any{"\x7f", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_emoji", true, []any{"🔒", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_empty", false, []any{"", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_invalid_utf8", false, []any{"a\xffb", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_max", true, []any{strings.Repeat("n", 256), "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_max_plus_1", false, []any{strings.Repeat("n", 257), "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_multibyte_max", true, []any{strings.Repeat("é", 128), "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_multibyte_over", false, []any{strings.Repeat("é", 128) + "x", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_newline", false, []any{"a\nb", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_nul", false, []any{"a\x00b", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_space", true, []any{" ", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_surrogate", false, []any{"\xed\xa0\x80", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_truncated", false, []any{"ab\xc3", "me", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_ascii", true, []any{"lock", "orders/42", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_braces", true, []any{"lock", "{l:x}}{", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_c1", false, []any{"lock", "\u0085", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_colon", true, []any{"lock", "ns:name", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_del", false, []any{"lock", "\x7f", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_emoji", true, []any{"lock", "🔒", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_empty", true, []any{"lock", "", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_invalid_utf8", false, []any{"lock", "a\xffb", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_max", true, []any{"lock", strings.Repeat("n", 256), "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_max_plus_1", false, []any{"lock", strings.Repeat("n", 257), "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_multibyte_max", true, []any{"lock", strings.Repeat("é", 128), "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_multibyte_over", false, []any{"lock", strings.Repeat("é", 128) + "x", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_newline", false, []any{"lock", "a\nb", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_nul", false, []any{"lock", "a\x00b", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_space", true, []any{"lock", " ", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_surrogate", false, []any{"lock", "\xed\xa0\x80", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_truncated", false, []any{"lock", "ab\xc3", "", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"session_invalid_utf8", false, []any{"lock", "o", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"session_malformed", false, []any{"lock", "o", "ABC", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"session_real", true, []any{"lock", "o", "", true, false, int64(0), int32(0), true, int64(1), int32(0), true, int64(60), int32(0), true}},
	{"session_real_with_ttl", false, []any{"lock", "o", "", true, true, int64(10), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"session_unknown", true, []any{"lock", "o", "0123456789abcdef0123456789abcdef", false, false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"ttl_12h", false, []any{"lock", "", "", false, true, int64(43200), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_12h_1ns", false, []any{"lock", "", "", false, true, int64(43200), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_168h", false, []any{"lock", "", "", false, true, int64(604800), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_168h_1ns", false, []any{"lock", "", "", false, true, int64(604800), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_1h", true, []any{"lock", "", "", false, true, int64(3600), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_1h_1ns", false, []any{"lock", "", "", false, true, int64(3600), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_1m", true, []any{"lock", "", "", false, true, int64(60), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_1m_1ns", true, []any{"lock", "", "", false, true, int64(60), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_1ms", true, []any{"lock", "", "", false, true, int64(0), int32(1000000), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_1ns", false, []any{"lock", "", "", false, true, int64(0), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_1s", true, []any{"lock", "", "", false, true, int64(1), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_24h", false, []any{"lock", "", "", false, true, int64(86400), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_24h_1ns", false, []any{"lock", "", "", false, true, int64(86400), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_5m", true, []any{"lock", "", "", false, true, int64(300), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_5m_1ns", true, []any{"lock", "", "", false, true, int64(300), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_just_under_1ms", false, []any{"lock", "", "", false, true, int64(0), int32(999999), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_max_valid", false, []any{"lock", "", "", false, true, int64(315576000000), int32(999999999), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_maxint_duration", false, []any{"lock", "", "", false, true, int64(9223372036), int32(854775807), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_maxint_plus_1ns", false, []any{"lock", "", "", false, true, int64(9223372036), int32(854775808), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_maxint_seconds", false, []any{"lock", "", "", false, true, int64(9223372036854775807), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_min_valid", false, []any{"lock", "", "", false, true, int64(-315576000000), int32(-999999999), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_minint_seconds", false, []any{"lock", "", "", false, true, int64(-9223372036854775808), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_minus_1ns", false, []any{"lock", "", "", false, true, int64(0), int32(-1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_minus_1s", false, []any{"lock", "", "", false, true, int64(-1), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_nanos_1e9", false, []any{"lock", "", "", false, true, int64(0), int32(1000000000), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_nanos_max_int32", false, []any{"lock", "", "", false, true, int64(0), int32(2147483647), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_nanos_minus_1e9", false, []any{"lock", "", "", false, true, int64(0), int32(-1000000000), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_nanos_sign_mismatch", false, []any{"lock", "", "", false, true, int64(1), int32(-1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_seconds_out_of_range", false, []any{"lock", "", "", false, true, int64(315576000001), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_seconds_sign_mismatch", false, []any{"lock", "", "", false, true, int64(-1), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"ttl_zero", false, []any{"lock", "", "", false, true, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"wait_12h", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(43200), int32(0), false, int64(0), int32(0), true}},
	{"wait_12h_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(43200), int32(1), false, int64(0), int32(0), true}},
	{"wait_168h", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(604800), int32(0), false, int64(0), int32(0), true}},
	{"wait_168h_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(604800), int32(1), false, int64(0), int32(0), true}},
	{"wait_1h", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(3600), int32(0), false, int64(0), int32(0), true}},
	{"wait_1h_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(3600), int32(1), false, int64(0), int32(0), true}},
	{"wait_1m", true, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(60), int32(0), false, int64(0), int32(0), true}},
	{"wait_1m_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(60), int32(1), false, int64(0), int32(0), true}},
	{"wait_1ms", true, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(0), int32(1000000), false, int64(0), int32(0), true}},
	{"wait_1ns", true, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(0), int32(1), false, int64(0), int32(0), true}},
	{"wait_1s", true, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(1), int32(0), false, int64(0), int32(0), true}},
	{"wait_24h", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(86400), int32(0), false, int64(0), int32(0), true}},
	{"wait_24h_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(86400), int32(1), false, int64(0), int32(0), true}},
	{"wait_5m", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(300), int32(0), false, int64(0), int32(0), true}},
	{"wait_5m_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(300), int32(1), false, int64(0), int32(0), true}},
	{"wait_just_under_1ms", true, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(0), int32(999999), false, int64(0), int32(0), true}},
	{"wait_max_valid", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(315576000000), int32(999999999), false, int64(0), int32(0), true}},
	{"wait_maxint_duration", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(9223372036), int32(854775807), false, int64(0), int32(0), true}},
	{"wait_maxint_plus_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(9223372036), int32(854775808), false, int64(0), int32(0), true}},
	{"wait_maxint_seconds", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(9223372036854775807), int32(0), false, int64(0), int32(0), true}},
	{"wait_min_valid", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(-315576000000), int32(-999999999), false, int64(0), int32(0), true}},
	{"wait_minint_seconds", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(-9223372036854775808), int32(0), false, int64(0), int32(0), true}},
	{"wait_minus_1ns", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(0), int32(-1), false, int64(0), int32(0), true}},
	{"wait_minus_1s", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(-1), int32(0), false, int64(0), int32(0), true}},
	{"wait_nanos_1e9", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(0), int32(1000000000), false, int64(0), int32(0), true}},
	{"wait_nanos_max_int32", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(0), int32(2147483647), false, int64(0), int32(0), true}},
	{"wait_nanos_minus_1e9", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(0), int32(-1000000000), false, int64(0), int32(0), true}},
	{"wait_nanos_sign_mismatch", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(1), int32(-1), false, int64(0), int32(0), true}},
	{"wait_seconds_out_of_range", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(315576000001), int32(0), false, int64(0), int32(0), true}},
	{"wait_seconds_sign_mismatch", false, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(-1), int32(1), false, int64(0), int32(0), true}},
	{"wait_zero", true, []any{"lock", "", "", false, false, int64(0), int32(0), true, int64(0), int32(0), false, int64(0), int32(0), true}},
}

func FuzzLockRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzLockSeeds)
	f.Fuzz(func(t *testing.T, name, owner, sessionID string, realSession bool,
		ttlSet bool, ttlS int64, ttlN int32, waitSet bool, waitS int64, waitN int32,
		holdSet bool, holdS int64, holdN int32, twice bool) {
		seed := seedKey(name, owner, sessionID, realSession, ttlSet, ttlS, ttlN, waitSet, waitS, waitN, holdSet, holdS, holdN, twice)
		known, bad := valid[seed], invalid[seed]
		e := newFuzzEnv(t)
		fields := []string{"name", "owner", "session_id", "ttl", "wait", "max_hold"}
		if realSession {
			st, err := e.svc.Sessions.Open(e.ctx, DefaultNamespace, "", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			sessionID = st.ID
		}
		req := &coordv1.LockRequest{Name: name, Owner: owner, SessionId: sessionID,
			Ttl: dur(ttlSet, ttlS, ttlN), Wait: dur(waitSet, waitS, waitN), MaxHold: dur(holdSet, holdS, holdN)}

		// Before any lock exists, the fuzzed name and token (the session_id
		// string) through GetLock, Renew and Release: the lock is free, or
		// the request INVALID_ARGUMENT (and then it never reached the store).
		gr, code, _ := fuzzCall(e, "GetLock", func() (*coordv1.GetLockResponse, error) {
			return e.locks.GetLock(e.ctx, &coordv1.GetLockRequest{Name: name})
		}, "name")
		if code == codes.OK {
			e.must(!gr.GetHeld() && gr.GetFence() == 0 && gr.GetOwner() == "", "GetLock", "name %q before any Lock: %v", name, gr)
		}
		renew := &coordv1.RenewRequest{Name: name, Token: sessionID, Ttl: req.GetTtl()}
		rr, code, _ := fuzzCall(e, "Renew", func() (*coordv1.RenewResponse, error) { return e.locks.Renew(e.ctx, renew) }, "name", "token", "ttl")
		e.must(code != codes.OK, "Renew", "of a lock nobody holds: %v", rr)
		rel, code, _ := fuzzCall(e, "Release", func() (*coordv1.ReleaseResponse, error) {
			return e.locks.Release(e.ctx, &coordv1.ReleaseRequest{Name: name, Token: sessionID})
		}, "name", "token")
		if code == codes.OK {
			e.must(!rel.GetReleased(), "Release", "name %q, token %q, before any Lock: %v", name, sessionID, rel)
		}

		tok := sessionID // what Release is given: a token held, or the fuzzed string
		for i := 0; i < 1+btoi(twice); i++ {
			resp, code, err := fuzzCall(e, "Lock", func() (*coordv1.LockResponse, error) { return e.locks.Lock(e.ctx, req) }, fields...)
			e.accepted(known, "a valid seed", "Lock", code, err, req)
			e.refused(bad, "Lock", code, err, req)
			e.accepted(i > 0, "accepted the first time", "Lock", code, err, req)
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
			rr, code, err := fuzzCall(e, "Renew", func() (*coordv1.RenewResponse, error) { return e.locks.Renew(e.ctx, renew) }, "name", "token", "ttl")
			switch {
			case sessionID != "" || req.Ttl == nil:
				// Renew requires a ttl; a session-bound lock has none.
				if code != codes.InvalidArgument {
					t.Fatalf("Renew(%v) without a ttl: %v (%v, %v), want INVALID_ARGUMENT", renew, code, rr, err)
				}
			default:
				// The TTL Lock took, for the holder.
				e.accepted(true, "the ttl Lock took, with the lock's token", "Renew", code, err, renew)
				e.must(code != codes.FailedPrecondition, "Renew", "the holder's renewal: %v", err)
			}
			gr, code, err := fuzzCall(e, "GetLock", func() (*coordv1.GetLockResponse, error) {
				return e.locks.GetLock(e.ctx, &coordv1.GetLockRequest{Name: name})
			}, "name")
			if code != codes.OK {
				t.Fatalf("GetLock(%q) of a held lock: %v", name, err)
			}
			e.must(gr.GetHeld() && gr.GetOwner() == owner && gr.GetSessionBound() == (req.GetSessionId() != "") && gr.GetFence() == resp.GetFence(),
				"GetLock", "%v after Lock %v", gr, req)
		}
		rel, code, err := fuzzCall(e, "Release", func() (*coordv1.ReleaseResponse, error) {
			return e.locks.Release(e.ctx, &coordv1.ReleaseRequest{Name: name, Token: tok})
		}, "name", "token")
		e.accepted(tok != sessionID, "the lock's name and token", "Release", code, err, name+" "+tok)
		if code == codes.OK {
			e.must(rel.GetReleased() == (tok != sessionID), "Release", "name %q, token %q: %v", name, tok, rel)
		}
	})
}

// naiveCapacity is the most one call may cost under l: its limit, or a
// bucket's burst; a token bucket's burst defaults to its limit, a leaky
// bucket's to 1. It checks the answers to requests accepted.
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

var fuzzAllowSeeds = []fuzzSeed{
	{"alg_-1", false, []any{"k", "", true, int32(-1), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"alg_-1_burst", false, []any{"k", "", true, int32(-1), int64(10), true, int64(60), int32(0), int64(5), int64(5), true, byte(3), int64(0)}},
	{"alg_0", false, []any{"k", "", true, int32(0), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"alg_0_burst", false, []any{"k", "", true, int32(0), int64(10), true, int64(60), int32(0), int64(5), int64(5), true, byte(3), int64(0)}},
	{"alg_1", true, []any{"k", "", true, int32(1), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"alg_1_burst", false, []any{"k", "", true, int32(1), int64(10), true, int64(60), int32(0), int64(5), int64(5), true, byte(3), int64(0)}},
	{"alg_2", true, []any{"k", "", true, int32(2), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"alg_2_burst", false, []any{"k", "", true, int32(2), int64(10), true, int64(60), int32(0), int64(5), int64(5), true, byte(3), int64(0)}},
	{"alg_3", true, []any{"k", "", true, int32(3), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"alg_3_burst", false, []any{"k", "", true, int32(3), int64(10), true, int64(60), int32(0), int64(5), int64(5), true, byte(3), int64(0)}},
	{"alg_4", true, []any{"k", "", true, int32(4), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"alg_4_burst", true, []any{"k", "", true, int32(4), int64(10), true, int64(60), int32(0), int64(5), int64(5), true, byte(3), int64(0)}},
	{"alg_5", true, []any{"k", "", true, int32(5), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"alg_5_burst", true, []any{"k", "", true, int32(5), int64(10), true, int64(60), int32(0), int64(5), int64(5), true, byte(3), int64(0)}},
	{"alg_6", false, []any{"k", "", true, int32(6), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"alg_6_burst", false, []any{"k", "", true, int32(6), int64(10), true, int64(60), int32(0), int64(5), int64(5), true, byte(3), int64(0)}},
	{"alg_max_int32", false, []any{"k", "", true, int32(2147483647), int64(10), true, int64(60), int32(0), int64(0), int64(1), false, byte(0), int64(0)}},
	{"bucket_one_per_us", true, []any{"k", "", true, int32(4), int64(1000), true, int64(0), int32(1000000), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"bucket_over_one_per_us", false, []any{"k", "", true, int32(5), int64(2000), true, int64(0), int32(1000000), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"bucket_rate_not_whole_us", false, []any{"k", "", true, int32(4), int64(3), true, int64(1), int32(0), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"bucket_slow_rate_max_period_big_burst", false, []any{"k", "", true, int32(4), int64(1), true, int64(604800), int32(0), int64(1000000000), int64(1000000000), false, byte(1), int64(1)}},
	{"burst_max", false, []any{"k", "", true, int32(4), int64(10), true, int64(60), int32(0), int64(1000000000), int64(1000000000), false, byte(1), int64(1)}},
	{"burst_max_plus_1", false, []any{"k", "", true, int32(5), int64(10), true, int64(60), int32(0), int64(1000000001), int64(0), false, byte(0), int64(0)}},
	{"burst_negative", false, []any{"k", "", true, int32(4), int64(10), true, int64(60), int32(0), int64(-1), int64(0), false, byte(0), int64(0)}},
	{"burst_on_window", false, []any{"k", "", true, int32(1), int64(10), true, int64(60), int32(0), int64(1), int64(0), false, byte(0), int64(0)}},
	{"cost_minint", false, []any{"k", "", true, int32(1), int64(10), true, int64(60), int32(0), int64(0), int64(-9223372036854775808), false, byte(0), int64(0)}},
	{"cost_negative", false, []any{"k", "", true, int32(1), int64(10), true, int64(60), int32(0), int64(0), int64(-1), false, byte(0), int64(0)}},
	{"cost_over_capacity", false, []any{"k", "", true, int32(4), int64(10), true, int64(60), int32(0), int64(3), int64(4), false, byte(0), int64(0)}},
	{"gcra_max_period", false, []any{"k", "", true, int32(4), int64(1000000000), true, int64(604800), int32(0), int64(1000000000), int64(1000000000), false, byte(3), int64(7200000000000)}},
	{"key_ascii", true, []any{"orders/42", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_braces", true, []any{"{l:x}}{", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_c1", false, []any{"\u0085", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_colon", true, []any{"ns:name", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_del", false, []any{"\x7f", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_emoji", true, []any{"🔒", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_empty", false, []any{"", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_invalid_utf8", false, []any{"a\xffb", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_max", true, []any{strings.Repeat("n", 256), "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_max_plus_1", false, []any{strings.Repeat("n", 257), "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_multibyte_max", true, []any{strings.Repeat("é", 128), "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_multibyte_over", false, []any{strings.Repeat("é", 128) + "x", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_newline", false, []any{"a\nb", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_nul", false, []any{"a\x00b", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_space", true, []any{" ", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_surrogate", false, []any{"\xed\xa0\x80", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"key_truncated", false, []any{"ab\xc3", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"leaky_slow_rate_max_period_big_burst", false, []any{"k", "", true, int32(5), int64(1), true, int64(604800), int32(0), int64(100000000), int64(1), false, byte(3), int64(1)}},
	{"limit_max", true, []any{"k", "", true, int32(1), int64(1000000000), true, int64(60), int32(0), int64(0), int64(1000000000), false, byte(1), int64(1)}},
	{"limit_max_plus_1", false, []any{"k", "", true, int32(1), int64(1000000001), true, int64(60), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"limit_negative", false, []any{"k", "", true, int32(1), int64(-1), true, int64(60), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"limit_zero", false, []any{"k", "", true, int32(1), int64(0), true, int64(60), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"log_limit_max", true, []any{"k", "", true, int32(3), int64(1000), true, int64(1), int32(0), int64(0), int64(1000), false, byte(2), int64(999999999)}},
	{"log_limit_over", false, []any{"k", "", true, int32(3), int64(1001), true, int64(1), int32(0), int64(0), int64(1), false, byte(0), int64(0)}},
	{"no_policy_no_limit", false, []any{"k", "", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"period_0", false, []any{"k", "", true, int32(2), int64(10), true, int64(0), int32(0), int64(0), int64(1), false, byte(3), int64(333)}},
	{"period_168h", true, []any{"k", "", true, int32(2), int64(10), true, int64(604800), int32(0), int64(0), int64(1), false, byte(3), int64(333)}},
	{"period_168h_1ns", false, []any{"k", "", true, int32(2), int64(10), true, int64(604800), int32(1), int64(0), int64(1), false, byte(3), int64(333)}},
	{"period_1ms", true, []any{"k", "", true, int32(2), int64(10), true, int64(0), int32(1000000), int64(0), int64(1), false, byte(3), int64(333)}},
	{"period_bad_sign", false, []any{"k", "", true, int32(2), int64(10), true, int64(1), int32(-1), int64(0), int64(1), false, byte(3), int64(333)}},
	{"period_not_whole_us", false, []any{"k", "", true, int32(1), int64(10), true, int64(1), int32(1), int64(0), int64(1), false, byte(3), int64(1000000)}},
	{"period_out_of_range", false, []any{"k", "", true, int32(2), int64(10), true, int64(315576000001), int32(0), int64(0), int64(1), false, byte(3), int64(333)}},
	{"period_under_1ms", false, []any{"k", "", true, int32(2), int64(10), true, int64(0), int32(999999), int64(0), int64(1), false, byte(3), int64(333)}},
	{"period_unset", false, []any{"k", "", true, int32(1), int64(10), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"policy_and_limit", false, []any{"k", "log", true, int32(1), int64(10), true, int64(60), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"policy_bucket", true, []any{"k", "bucket", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(3), int64(1000000)}},
	{"policy_bucket_cost_over", false, []any{"k", "bucket", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(11), false, byte(0), int64(0)}},
	{"policy_fixed", true, []any{"k", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(3), int64(1000000)}},
	{"policy_fixed_cost_over", false, []any{"k", "fixed", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(11), false, byte(0), int64(0)}},
	{"policy_invalid_utf8", false, []any{"k", "lo\xffg", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"policy_leaky", true, []any{"k", "leaky", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(3), int64(1000000)}},
	{"policy_leaky_cost_over", false, []any{"k", "leaky", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(11), false, byte(0), int64(0)}},
	{"policy_log", true, []any{"k", "log", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(3), int64(1000000)}},
	{"policy_log_cost_over", false, []any{"k", "log", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(11), false, byte(0), int64(0)}},
	{"policy_window", true, []any{"k", "window", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(3), int64(1000000)}},
	{"policy_window_cost_over", false, []any{"k", "window", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(11), false, byte(0), int64(0)}},
	{"unknown_policy", false, []any{"k", "nope", false, int32(0), int64(0), false, int64(0), int32(0), int64(0), int64(0), false, byte(0), int64(0)}},
	{"window_max_period_max_limit", true, []any{"k", "", true, int32(2), int64(1000000000), true, int64(604800), int32(0), int64(0), int64(1000000000), false, byte(3), int64(3600000000000)}},
}

func FuzzAllowRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzAllowSeeds)
	f.Fuzz(func(t *testing.T, key, policy string, limitSet bool, alg int32, limit int64,
		periodSet bool, periodS int64, periodN int32, burst, cost int64, peek bool, calls uint8, advance int64) {
		seed := seedKey(key, policy, limitSet, alg, limit, periodSet, periodS, periodN, burst, cost, peek, calls, advance)
		known, bad := valid[seed], invalid[seed]
		e := newFuzzEnv(t)
		fields := []string{"key", "policy", "limit", "limit.algorithm", "limit.limit", "limit.period", "limit.burst", "cost"}
		req := &coordv1.AllowRequest{Key: key, Policy: policy, Cost: cost, Peek: peek}
		if limitSet {
			req.Limit = &coordv1.Limit{Algorithm: coordv1.Algorithm(alg), Limit: limit, Period: dur(periodSet, periodS, periodN), Burst: burst}
		}

		// The limit an accepted request is under: its policy's, or its
		// inline limit (a request has one or the other).
		p, isPolicy := fuzzPolicies[policy]
		l := p.Limit
		if limitSet {
			l = store.Limit{Algorithm: store.Algorithm(alg), Limit: limit, Period: req.Limit.GetPeriod().AsDuration(), Burst: burst}
		}
		capacity := naiveCapacity(l)

		var taken int64 // the cost of the calls allowed, peeks and shadow mode aside
		for i := 0; i <= int(calls%4); i++ {
			if i > 0 {
				e.clk.Advance(forward(advance))
			}
			resp, code, err := fuzzCall(e, "Allow", func() (*coordv1.AllowResponse, error) { return e.limits.Allow(e.ctx, req) }, fields...)
			e.accepted(known, "a valid seed", "Allow", code, err, req)
			e.refused(bad, "Allow", code, err, req)
			e.accepted(i > 0, "accepted the first time", "Allow", code, err, req)
			if code != codes.OK {
				return
			}
			e.must(((isPolicy && !limitSet) || (policy == "" && limitSet)) && l.Period > 0 && cost >= 0 && cost <= capacity, "Allow",
				"call %d: policy %q (configured: %v) with limit %v, cost %d (capacity %d)", i, policy, isPolicy, req.Limit, cost, capacity)
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

var fuzzBeginIdempotentSeeds = []fuzzSeed{
	{"abandoned_then_other_fp", true, []any{"k", "fp", "fp2", true, int64(0), int32(1000000), false, int64(0), int32(0), int64(1000)}},
	{"abandoned_then_same_fp", true, []any{"k", "fp", "fp", true, int64(0), int32(1000000), true, int64(1), int32(0), int64(2000)}},
	{"fingerprint_ascii", true, []any{"k", "orders/42", "orders/42x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_braces", true, []any{"k", "{l:x}}{", "{l:x}}{x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_c1", false, []any{"k", "\u0085", "\u0085x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_colon", true, []any{"k", "ns:name", "ns:namex", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_del", false, []any{"k", "\x7f", "\x7fx", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_emoji", true, []any{"k", "🔒", "🔒x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_empty", false, []any{"k", "", "x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_invalid_utf8", false, []any{"k", "a\xffb", "a\xffbx", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_max", true, []any{"k", strings.Repeat("f", 256), strings.Repeat("f", 256), false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_max_plus_1", false, []any{"k", strings.Repeat("f", 257), "", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_multibyte_max", true, []any{"k", strings.Repeat("é", 128), strings.Repeat("é", 128) + "x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_multibyte_over", false, []any{"k", strings.Repeat("é", 128) + "x", strings.Repeat("é", 128) + "xx", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_newline", false, []any{"k", "a\nb", "a\nbx", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_nul", false, []any{"k", "a\x00b", "a\x00bx", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_space", true, []any{"k", " ", " x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_surrogate", false, []any{"k", "\xed\xa0\x80", "\xed\xa0\x80x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"fingerprint_truncated", false, []any{"k", "ab\xc3", "ab\xc3x", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"in_progress_wait", true, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(60), int32(0), int64(0)}},
	{"key_ascii", true, []any{"orders/42", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_braces", true, []any{"{l:x}}{", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_c1", false, []any{"\u0085", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_colon", true, []any{"ns:name", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_del", false, []any{"\x7f", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_emoji", true, []any{"🔒", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_empty", false, []any{"", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_invalid_utf8", false, []any{"a\xffb", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_max", true, []any{strings.Repeat("n", 256), "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_max_plus_1", false, []any{strings.Repeat("n", 257), "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_multibyte_max", true, []any{strings.Repeat("é", 128), "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_multibyte_over", false, []any{strings.Repeat("é", 128) + "x", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_newline", false, []any{"a\nb", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_nul", false, []any{"a\x00b", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_space", true, []any{" ", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_surrogate", false, []any{"\xed\xa0\x80", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"key_truncated", false, []any{"ab\xc3", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"other_fingerprint", true, []any{"k", "fp", "fp2", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"processing_ttl_12h", false, []any{"k", "fp", "fp", true, int64(43200), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_12h_1ns", false, []any{"k", "fp", "fp", true, int64(43200), int32(1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_168h", false, []any{"k", "fp", "fp", true, int64(604800), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_168h_1ns", false, []any{"k", "fp", "fp", true, int64(604800), int32(1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_1h", true, []any{"k", "fp", "fp", true, int64(3600), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_1h_1ns", false, []any{"k", "fp", "fp", true, int64(3600), int32(1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_1m", true, []any{"k", "fp", "fp", true, int64(60), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_1m_1ns", true, []any{"k", "fp", "fp", true, int64(60), int32(1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_1ms", true, []any{"k", "fp", "fp", true, int64(0), int32(1000000), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_1ns", false, []any{"k", "fp", "fp", true, int64(0), int32(1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_1s", true, []any{"k", "fp", "fp", true, int64(1), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_24h", false, []any{"k", "fp", "fp", true, int64(86400), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_24h_1ns", false, []any{"k", "fp", "fp", true, int64(86400), int32(1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_5m", true, []any{"k", "fp", "fp", true, int64(300), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_5m_1ns", true, []any{"k", "fp", "fp", true, int64(300), int32(1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_just_under_1ms", false, []any{"k", "fp", "fp", true, int64(0), int32(999999), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_max_valid", false, []any{"k", "fp", "fp", true, int64(315576000000), int32(999999999), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_maxint_duration", false, []any{"k", "fp", "fp", true, int64(9223372036), int32(854775807), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_maxint_plus_1ns", false, []any{"k", "fp", "fp", true, int64(9223372036), int32(854775808), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_maxint_seconds", false, []any{"k", "fp", "fp", true, int64(9223372036854775807), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_min_valid", false, []any{"k", "fp", "fp", true, int64(-315576000000), int32(-999999999), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_minint_seconds", false, []any{"k", "fp", "fp", true, int64(-9223372036854775808), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_minus_1ns", false, []any{"k", "fp", "fp", true, int64(0), int32(-1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_minus_1s", false, []any{"k", "fp", "fp", true, int64(-1), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_nanos_1e9", false, []any{"k", "fp", "fp", true, int64(0), int32(1000000000), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_nanos_max_int32", false, []any{"k", "fp", "fp", true, int64(0), int32(2147483647), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_nanos_minus_1e9", false, []any{"k", "fp", "fp", true, int64(0), int32(-1000000000), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_nanos_sign_mismatch", false, []any{"k", "fp", "fp", true, int64(1), int32(-1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_seconds_out_of_range", false, []any{"k", "fp", "fp", true, int64(315576000001), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_seconds_sign_mismatch", false, []any{"k", "fp", "fp", true, int64(-1), int32(1), false, int64(0), int32(0), int64(1000000)}},
	{"processing_ttl_zero", false, []any{"k", "fp", "fp", true, int64(0), int32(0), false, int64(0), int32(0), int64(1000000)}},
	{"same_fingerprint", true, []any{"k", "fp", "fp", false, int64(0), int32(0), false, int64(0), int32(0), int64(0)}},
	{"wait_12h", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(43200), int32(0), int64(0)}},
	{"wait_12h_1ns", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(43200), int32(1), int64(0)}},
	{"wait_168h", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(604800), int32(0), int64(0)}},
	{"wait_168h_1ns", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(604800), int32(1), int64(0)}},
	{"wait_1h", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(3600), int32(0), int64(0)}},
	{"wait_1h_1ns", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(3600), int32(1), int64(0)}},
	{"wait_1m", true, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(60), int32(0), int64(0)}},
	{"wait_1m_1ns", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(60), int32(1), int64(0)}},
	{"wait_1ms", true, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(0), int32(1000000), int64(0)}},
	{"wait_1ns", true, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(0), int32(1), int64(0)}},
	{"wait_1s", true, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(1), int32(0), int64(0)}},
	{"wait_24h", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(86400), int32(0), int64(0)}},
	{"wait_24h_1ns", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(86400), int32(1), int64(0)}},
	{"wait_5m", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(300), int32(0), int64(0)}},
	{"wait_5m_1ns", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(300), int32(1), int64(0)}},
	{"wait_just_under_1ms", true, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(0), int32(999999), int64(0)}},
	{"wait_max_valid", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(315576000000), int32(999999999), int64(0)}},
	{"wait_maxint_duration", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(9223372036), int32(854775807), int64(0)}},
	{"wait_maxint_plus_1ns", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(9223372036), int32(854775808), int64(0)}},
	{"wait_maxint_seconds", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(9223372036854775807), int32(0), int64(0)}},
	{"wait_min_valid", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(-315576000000), int32(-999999999), int64(0)}},
	{"wait_minint_seconds", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(-9223372036854775808), int32(0), int64(0)}},
	{"wait_minus_1ns", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(0), int32(-1), int64(0)}},
	{"wait_minus_1s", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(-1), int32(0), int64(0)}},
	{"wait_nanos_1e9", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(0), int32(1000000000), int64(0)}},
	{"wait_nanos_max_int32", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(0), int32(2147483647), int64(0)}},
	{"wait_nanos_minus_1e9", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(0), int32(-1000000000), int64(0)}},
	{"wait_nanos_sign_mismatch", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(1), int32(-1), int64(0)}},
	{"wait_seconds_out_of_range", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(315576000001), int32(0), int64(0)}},
	{"wait_seconds_sign_mismatch", false, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(-1), int32(1), int64(0)}},
	{"wait_zero", true, []any{"k", "fp", "fp", false, int64(0), int32(0), true, int64(0), int32(0), int64(0)}},
}

func FuzzBeginIdempotentRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzBeginIdempotentSeeds)
	f.Fuzz(func(t *testing.T, key, fingerprint, fingerprint2 string,
		pttlSet bool, pttlS int64, pttlN int32, waitSet bool, waitS int64, waitN int32, advance int64) {
		seed := seedKey(key, fingerprint, fingerprint2, pttlSet, pttlS, pttlN, waitSet, waitS, waitN, advance)
		known, bad := valid[seed], invalid[seed]
		e := newFuzzEnv(t)
		fields := []string{"key", "fingerprint", "processing_ttl", "wait"}
		req := &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: fingerprint,
			ProcessingTtl: dur(pttlSet, pttlS, pttlN), Wait: dur(waitSet, waitS, waitN)}
		resp, code, err := fuzzCall(e, "BeginIdempotent", func() (*coordv1.BeginIdempotentResponse, error) {
			return e.idem.BeginIdempotent(e.ctx, req)
		}, fields...)
		e.accepted(known, "a valid seed", "BeginIdempotent", code, err, req)
		e.refused(bad, "BeginIdempotent", code, err, req)
		if code != codes.OK {
			return
		}
		e.must(resp.GetOutcome() == coordv1.Outcome_OUTCOME_EXECUTE && token.Valid(resp.GetOwnerToken()), "BeginIdempotent", "response %v on a new key", resp)

		// Again, maybe later, maybe with another fingerprint: in progress,
		// taken over, or a fingerprint mismatch (FAILED_PRECONDITION).
		e.clk.Advance(forward(advance))
		req2 := &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: fingerprint2, ProcessingTtl: req.ProcessingTtl, Wait: req.Wait}
		resp2, code, err := fuzzCall(e, "BeginIdempotent", func() (*coordv1.BeginIdempotentResponse, error) {
			return e.idem.BeginIdempotent(e.ctx, req2)
		}, fields...)
		e.accepted(fingerprint2 == fingerprint, "the request accepted before", "BeginIdempotent", code, err, req2)
		if code == codes.FailedPrecondition {
			e.must(fingerprint2 != fingerprint, "BeginIdempotent", "the same fingerprint mismatched")
		}
		if code == codes.OK {
			e.must(fingerprint2 == fingerprint, "BeginIdempotent", "fingerprint %q matched %q: %v", fingerprint2, fingerprint, resp2)
		}
	})
}

var fuzzFinishSeeds = []fuzzSeed{
	{"empty_result", true, []any{"k", "", true, []byte(""), false, "", false, false, int64(0), int32(0), true, int64(10), int32(0)}},
	{"extend_ttl_12h", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(43200), int32(0)}},
	{"extend_ttl_12h_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(43200), int32(1)}},
	{"extend_ttl_168h", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(604800), int32(0)}},
	{"extend_ttl_168h_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(604800), int32(1)}},
	{"extend_ttl_1h", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(3600), int32(0)}},
	{"extend_ttl_1h_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(3600), int32(1)}},
	{"extend_ttl_1m", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(60), int32(0)}},
	{"extend_ttl_1m_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(60), int32(1)}},
	{"extend_ttl_1ms", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(0), int32(1000000)}},
	{"extend_ttl_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(0), int32(1)}},
	{"extend_ttl_1s", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(1), int32(0)}},
	{"extend_ttl_24h", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(86400), int32(0)}},
	{"extend_ttl_24h_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(86400), int32(1)}},
	{"extend_ttl_5m", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(300), int32(0)}},
	{"extend_ttl_5m_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(300), int32(1)}},
	{"extend_ttl_just_under_1ms", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(0), int32(999999)}},
	{"extend_ttl_max_valid", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(315576000000), int32(999999999)}},
	{"extend_ttl_maxint_duration", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(9223372036), int32(854775807)}},
	{"extend_ttl_maxint_plus_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(9223372036), int32(854775808)}},
	{"extend_ttl_maxint_seconds", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(9223372036854775807), int32(0)}},
	{"extend_ttl_min_valid", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(-315576000000), int32(-999999999)}},
	{"extend_ttl_minint_seconds", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(-9223372036854775808), int32(0)}},
	{"extend_ttl_minus_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(0), int32(-1)}},
	{"extend_ttl_minus_1s", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(-1), int32(0)}},
	{"extend_ttl_nanos_1e9", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(0), int32(1000000000)}},
	{"extend_ttl_nanos_max_int32", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(0), int32(2147483647)}},
	{"extend_ttl_nanos_minus_1e9", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(0), int32(-1000000000)}},
	{"extend_ttl_nanos_sign_mismatch", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(1), int32(-1)}},
	{"extend_ttl_seconds_out_of_range", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(315576000001), int32(0)}},
	{"extend_ttl_seconds_sign_mismatch", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(-1), int32(1)}},
	{"extend_ttl_zero", true, []any{"k", "", true, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(0), int32(0)}},
	{"failure", true, []any{"k", "", true, []byte(""), true, "boom\nline 2\t\x00", false, true, int64(60), int32(0), false, int64(0), int32(0)}},
	{"failure_and_result", false, []any{"k", "", true, []byte("r"), true, "m", false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"failure_invalid_utf8", false, []any{"k", "", true, []byte(""), true, "\xff", false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"failure_max", true, []any{"k", "", true, []byte(""), true, strings.Repeat("m", 4096), false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"failure_max_plus_1", false, []any{"k", "", true, []byte(""), true, strings.Repeat("m", 4097), false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"failure_retryable", true, []any{"k", "", true, []byte(""), true, "retry", true, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"key_invalid", false, []any{"\x00", "", true, []byte(""), false, "", false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"owner_empty", false, []any{"k", "", false, []byte(""), false, "", false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"owner_malformed", false, []any{"k", "XYZ", false, []byte(""), false, "", false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"owner_unknown", true, []any{"k", "0123456789abcdef0123456789abcdef", false, []byte("r"), false, "", false, false, int64(0), int32(0), true, int64(1), int32(0)}},
	{"result", true, []any{"k", "", true, []byte("\x00ok\xff"), false, "", false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"result_large", true, []any{"k", "", true, []byte(strings.Repeat("r", 70000)), false, "", false, false, int64(0), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_12h", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(43200), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_12h_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(43200), int32(1), false, int64(0), int32(0)}},
	{"result_ttl_168h", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(604800), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_168h_1ns", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(604800), int32(1), false, int64(0), int32(0)}},
	{"result_ttl_1h", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(3600), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_1h_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(3600), int32(1), false, int64(0), int32(0)}},
	{"result_ttl_1m", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(60), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_1m_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(60), int32(1), false, int64(0), int32(0)}},
	{"result_ttl_1ms", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(0), int32(1000000), false, int64(0), int32(0)}},
	{"result_ttl_1ns", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(0), int32(1), false, int64(0), int32(0)}},
	{"result_ttl_1s", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(1), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_24h", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(86400), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_24h_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(86400), int32(1), false, int64(0), int32(0)}},
	{"result_ttl_5m", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(300), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_5m_1ns", true, []any{"k", "", true, []byte("r"), false, "", false, true, int64(300), int32(1), false, int64(0), int32(0)}},
	{"result_ttl_just_under_1ms", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(0), int32(999999), false, int64(0), int32(0)}},
	{"result_ttl_max_valid", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(315576000000), int32(999999999), false, int64(0), int32(0)}},
	{"result_ttl_maxint_duration", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(9223372036), int32(854775807), false, int64(0), int32(0)}},
	{"result_ttl_maxint_plus_1ns", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(9223372036), int32(854775808), false, int64(0), int32(0)}},
	{"result_ttl_maxint_seconds", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(9223372036854775807), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_min_valid", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(-315576000000), int32(-999999999), false, int64(0), int32(0)}},
	{"result_ttl_minint_seconds", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(-9223372036854775808), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_minus_1ns", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(0), int32(-1), false, int64(0), int32(0)}},
	{"result_ttl_minus_1s", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(-1), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_nanos_1e9", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(0), int32(1000000000), false, int64(0), int32(0)}},
	{"result_ttl_nanos_max_int32", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(0), int32(2147483647), false, int64(0), int32(0)}},
	{"result_ttl_nanos_minus_1e9", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(0), int32(-1000000000), false, int64(0), int32(0)}},
	{"result_ttl_nanos_sign_mismatch", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(1), int32(-1), false, int64(0), int32(0)}},
	{"result_ttl_seconds_out_of_range", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(315576000001), int32(0), false, int64(0), int32(0)}},
	{"result_ttl_seconds_sign_mismatch", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(-1), int32(1), false, int64(0), int32(0)}},
	{"result_ttl_zero", false, []any{"k", "", true, []byte("r"), false, "", false, true, int64(0), int32(0), false, int64(0), int32(0)}},
}

func FuzzFinishRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzFinishSeeds)
	f.Fuzz(func(t *testing.T, key, ownerToken string, realOwner bool, result []byte, failureSet bool, message string, retryable bool,
		ttlSet bool, ttlS int64, ttlN int32, extSet bool, extS int64, extN int32) {
		seed := seedKey(key, ownerToken, realOwner, result, failureSet, message, retryable, ttlSet, ttlS, ttlN, extSet, extS, extN)
		known, bad := valid[seed], invalid[seed]
		e := newFuzzEnv(t)
		if realOwner {
			b, code, _ := fuzzCall(e, "BeginIdempotent", func() (*coordv1.BeginIdempotentResponse, error) {
				return e.idem.BeginIdempotent(e.ctx, &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: "fp"})
			}, "key", "fingerprint")
			if code != codes.OK {
				return
			}
			ownerToken = b.GetOwnerToken()
		}
		ext := &coordv1.ExtendIdempotentRequest{Key: key, OwnerToken: ownerToken, ProcessingTtl: dur(extSet, extS, extN)}
		_, code, err := fuzzCall(e, "ExtendIdempotent", func() (*coordv1.ExtendIdempotentResponse, error) {
			return e.idem.ExtendIdempotent(e.ctx, ext)
		}, "key", "owner_token", "processing_ttl")
		if (code == codes.OK) != realOwner && code != codes.InvalidArgument {
			t.Fatalf("ExtendIdempotent(%v) (the owner: %v): %v", ext, realOwner, err)
		}

		req := &coordv1.FinishRequest{Key: key, OwnerToken: ownerToken, Result: bytes.Clone(result), ResultTtl: dur(ttlSet, ttlS, ttlN)}
		if failureSet {
			req.Failure = &coordv1.Failure{Message: message, Retryable: retryable}
		}
		resp, code, err := fuzzCall(e, "Finish", func() (*coordv1.FinishResponse, error) { return e.idem.Finish(e.ctx, req) },
			"key", "owner_token", "result", "failure", "failure.message", "result_ttl")
		e.accepted(known, "a valid seed", "Finish", code, err, req)
		e.refused(bad, "Finish", code, err, req)
		if (code == codes.OK) != realOwner && code != codes.InvalidArgument {
			t.Fatalf("Finish(%v) (the owner: %v): %v", req, realOwner, err)
		}
		if code != codes.OK {
			return
		}
		e.must(resp.GetStored(), "Finish", "request %v: %v", req, resp)

		// The outcome reads back exactly.
		b, code, err := fuzzCall(e, "BeginIdempotent", func() (*coordv1.BeginIdempotentResponse, error) {
			return e.idem.BeginIdempotent(e.ctx, &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: "fp"})
		}, "key", "fingerprint")
		if code != codes.OK {
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

var fuzzEnqueueSeeds = []fuzzSeed{
	{"dedup", true, []any{"q", []byte("hello"), false, int64(0), int32(0), false, int64(0), int32(0), "order-1", int32(0), true}},
	{"dedup_invalid", false, []any{"q", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "a\nb", int32(0), false}},
	{"dedup_max_plus_1", false, []any{"q", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), strings.Repeat("d", 257), int32(0), false}},
	{"delay_12h", true, []any{"q", []byte("x"), true, int64(43200), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_12h_1ns", true, []any{"q", []byte("x"), true, int64(43200), int32(1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_168h", true, []any{"q", []byte("x"), true, int64(604800), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_168h_1ns", false, []any{"q", []byte("x"), true, int64(604800), int32(1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_1h", true, []any{"q", []byte("x"), true, int64(3600), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_1h_1ns", true, []any{"q", []byte("x"), true, int64(3600), int32(1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_1m", true, []any{"q", []byte("x"), true, int64(60), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_1m_1ns", true, []any{"q", []byte("x"), true, int64(60), int32(1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_1ms", true, []any{"q", []byte("x"), true, int64(0), int32(1000000), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_1ns", true, []any{"q", []byte("x"), true, int64(0), int32(1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_1s", true, []any{"q", []byte("x"), true, int64(1), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_24h", true, []any{"q", []byte("x"), true, int64(86400), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_24h_1ns", true, []any{"q", []byte("x"), true, int64(86400), int32(1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_5m", true, []any{"q", []byte("x"), true, int64(300), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_5m_1ns", true, []any{"q", []byte("x"), true, int64(300), int32(1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_and_deliver", false, []any{"q", []byte(""), true, int64(1), int32(0), true, int64(1800000000), int32(0), "", int32(0), false}},
	{"delay_just_under_1ms", true, []any{"q", []byte("x"), true, int64(0), int32(999999), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_max_valid", false, []any{"q", []byte("x"), true, int64(315576000000), int32(999999999), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_maxint_duration", false, []any{"q", []byte("x"), true, int64(9223372036), int32(854775807), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_maxint_plus_1ns", false, []any{"q", []byte("x"), true, int64(9223372036), int32(854775808), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_maxint_seconds", false, []any{"q", []byte("x"), true, int64(9223372036854775807), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_min_valid", false, []any{"q", []byte("x"), true, int64(-315576000000), int32(-999999999), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_minint_seconds", false, []any{"q", []byte("x"), true, int64(-9223372036854775808), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_minus_1ns", false, []any{"q", []byte("x"), true, int64(0), int32(-1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_minus_1s", false, []any{"q", []byte("x"), true, int64(-1), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_nanos_1e9", false, []any{"q", []byte("x"), true, int64(0), int32(1000000000), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_nanos_max_int32", false, []any{"q", []byte("x"), true, int64(0), int32(2147483647), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_nanos_minus_1e9", false, []any{"q", []byte("x"), true, int64(0), int32(-1000000000), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_nanos_sign_mismatch", false, []any{"q", []byte("x"), true, int64(1), int32(-1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_seconds_out_of_range", false, []any{"q", []byte("x"), true, int64(315576000001), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_seconds_sign_mismatch", false, []any{"q", []byte("x"), true, int64(-1), int32(1), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_zero", true, []any{"q", []byte("x"), true, int64(0), int32(0), false, int64(0), int32(0), "d", int32(0), true}},
	{"delay_zero_and_deliver", false, []any{"q", []byte(""), true, int64(0), int32(0), true, int64(1800000000), int32(0), "", int32(0), false}},
	{"deliver_before_1970_micro", true, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(-1), int32(999999000), "", int32(0), true}},
	{"deliver_before_year_1", false, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(-62135596801), int32(0), "", int32(0), true}},
	{"deliver_max_delay", true, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(1800604800), int32(0), "", int32(0), true}},
	{"deliver_max_delay_1ns", false, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(1800604800), int32(1), "", int32(0), true}},
	{"deliver_maxint", false, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(9223372036854775807), int32(0), "", int32(0), true}},
	{"deliver_minint", false, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(-9223372036854775808), int32(0), "", int32(0), true}},
	{"deliver_nanos_1e9", false, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(1800000000), int32(1000000000), "", int32(0), true}},
	{"deliver_negative_nanos", false, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(1800000000), int32(-1), "", int32(0), true}},
	{"deliver_now", true, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(1800000000), int32(0), "", int32(0), true}},
	{"deliver_past", true, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(1799999999), int32(0), "", int32(0), true}},
	{"deliver_unix_epoch", true, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(0), int32(0), "", int32(0), true}},
	{"deliver_year_10000", false, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(253402300800), int32(0), "", int32(0), true}},
	{"deliver_year_1_zero_time", true, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(-62135596800), int32(0), "", int32(0), true}},
	{"deliver_year_9999_end", false, []any{"q", []byte("x"), false, int64(0), int32(0), true, int64(253402300799), int32(999999999), "", int32(0), true}},
	{"max_attempts_-1", false, []any{"q", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(-1), false}},
	{"max_attempts_-2147483648", false, []any{"q", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(-2147483648), false}},
	{"max_attempts_1", true, []any{"q", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(1), false}},
	{"max_attempts_100", true, []any{"q", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(100), false}},
	{"max_attempts_101", false, []any{"q", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(101), false}},
	{"max_attempts_2147483647", false, []any{"q", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(2147483647), false}},
	{"payload_binary", true, []any{"q", []byte("\x00\x01\xff"), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(1), false}},
	{"payload_max", true, []any{"q", []byte(strings.Repeat("p", 262144)), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"payload_max_plus_1", false, []any{"q", []byte(strings.Repeat("p", 262145)), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"plain", true, []any{"q", []byte("hello"), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), true}},
	{"queue_ascii", true, []any{"orders/42", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_braces", true, []any{"{l:x}}{", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_c1", false, []any{"\u0085", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_colon", true, []any{"ns:name", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_del", false, []any{"\x7f", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_emoji", true, []any{"🔒", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_empty", false, []any{"", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_invalid_utf8", false, []any{"a\xffb", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_max", true, []any{strings.Repeat("n", 256), []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_max_plus_1", false, []any{strings.Repeat("n", 257), []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_multibyte_max", true, []any{strings.Repeat("é", 128), []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_multibyte_over", false, []any{strings.Repeat("é", 128) + "x", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_newline", false, []any{"a\nb", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_nul", false, []any{"a\x00b", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_space", true, []any{" ", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_surrogate", false, []any{"\xed\xa0\x80", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
	{"queue_truncated", false, []any{"ab\xc3", []byte(""), false, int64(0), int32(0), false, int64(0), int32(0), "", int32(0), false}},
}

func FuzzEnqueueRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzEnqueueSeeds)
	f.Fuzz(func(t *testing.T, queueName string, payload []byte, delaySet bool, delayS int64, delayN int32,
		deliverSet bool, deliverS int64, deliverN int32, dedupID string, maxAttempts int32, twice bool) {
		seed := seedKey(queueName, payload, delaySet, delayS, delayN, deliverSet, deliverS, deliverN, dedupID, maxAttempts, twice)
		known, bad := valid[seed], invalid[seed]
		e := newFuzzEnv(t)
		fields := []string{"queue", "payload", "delay", "deliver_time", "dedup_id", "max_attempts"}
		req := &coordv1.EnqueueRequest{Queue: queueName, Payload: bytes.Clone(payload), Delay: dur(delaySet, delayS, delayN),
			DeliverTime: ts(deliverSet, deliverS, deliverN), DedupId: dedupID, MaxAttempts: maxAttempts}
		var first string
		for i := 0; i < 1+btoi(twice); i++ {
			resp, code, err := fuzzCall(e, "Enqueue", func() (*coordv1.EnqueueResponse, error) { return e.queues.Enqueue(e.ctx, req) }, fields...)
			e.accepted(known, "a valid seed", "Enqueue", code, err, req)
			e.refused(bad, "Enqueue", code, err, req)
			e.accepted(i > 0, "accepted the first time", "Enqueue", code, err, req)
			if code != codes.OK {
				return
			}
			e.must(token.Valid(resp.GetMessageId()) && resp.GetDuplicate() == (i > 0 && dedupID != "") &&
				(!resp.GetDuplicate() || resp.GetMessageId() == first) && !resp.GetDeliverTime().AsTime().Before(fuzzEpoch),
				"Enqueue", "call %d: response %v", i, resp)
			first = resp.GetMessageId()
		}
		st, code, err := fuzzCall(e, "Stats", func() (*coordv1.StatsResponse, error) {
			return e.queues.Stats(e.ctx, &coordv1.StatsRequest{Queue: queueName})
		}, "queue")
		if code != codes.OK {
			t.Fatalf("Stats(%q) after Enqueue: %v", queueName, err)
		}
		n := 2 - btoi(!twice || dedupID != "")
		e.must(st.GetReady()+st.GetDelayed() == int64(n) && st.GetInFlight() == 0 && st.GetDead() == 0, "Stats", "%v after %d enqueues", st, n)
	})
}

var fuzzClaimSeeds = []fuzzSeed{
	{"empty_queue_wait", true, []any{"q", int32(0), false, int64(0), int32(0), true, int64(60), int32(0), byte(0), []byte("")}},
	{"max_-1", false, []any{"q", int32(-1), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"max_-2147483648", false, []any{"q", int32(-2147483648), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"max_0", true, []any{"q", int32(0), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"max_1", true, []any{"q", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"max_100", true, []any{"q", int32(100), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"max_1000", false, []any{"q", int32(1000), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"max_1001", false, []any{"q", int32(1001), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"max_101", false, []any{"q", int32(101), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"max_2147483647", false, []any{"q", int32(2147483647), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("x")}},
	{"queue_ascii", true, []any{"orders/42", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_braces", true, []any{"{l:x}}{", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_c1", false, []any{"\u0085", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_colon", true, []any{"ns:name", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_del", false, []any{"\x7f", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_emoji", true, []any{"🔒", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_empty", false, []any{"", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_invalid_utf8", false, []any{"a\xffb", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_max", true, []any{strings.Repeat("n", 256), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_max_plus_1", false, []any{strings.Repeat("n", 257), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_multibyte_max", true, []any{strings.Repeat("é", 128), int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_multibyte_over", false, []any{strings.Repeat("é", 128) + "x", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_newline", false, []any{"a\nb", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_nul", false, []any{"a\x00b", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_space", true, []any{" ", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_surrogate", false, []any{"\xed\xa0\x80", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"queue_truncated", false, []any{"ab\xc3", int32(1), false, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"three_claim_two", true, []any{"q", int32(2), false, int64(0), int32(0), false, int64(0), int32(0), byte(3), []byte("\x00p\xff")}},
	{"visibility_12h", true, []any{"q", int32(1), true, int64(43200), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_12h_1ns", false, []any{"q", int32(1), true, int64(43200), int32(1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_168h", false, []any{"q", int32(1), true, int64(604800), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_168h_1ns", false, []any{"q", int32(1), true, int64(604800), int32(1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_1h", true, []any{"q", int32(1), true, int64(3600), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_1h_1ns", true, []any{"q", int32(1), true, int64(3600), int32(1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_1m", true, []any{"q", int32(1), true, int64(60), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_1m_1ns", true, []any{"q", int32(1), true, int64(60), int32(1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_1ms", true, []any{"q", int32(1), true, int64(0), int32(1000000), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_1ns", false, []any{"q", int32(1), true, int64(0), int32(1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_1s", true, []any{"q", int32(1), true, int64(1), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_24h", false, []any{"q", int32(1), true, int64(86400), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_24h_1ns", false, []any{"q", int32(1), true, int64(86400), int32(1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_5m", true, []any{"q", int32(1), true, int64(300), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_5m_1ns", true, []any{"q", int32(1), true, int64(300), int32(1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_just_under_1ms", false, []any{"q", int32(1), true, int64(0), int32(999999), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_max_valid", false, []any{"q", int32(1), true, int64(315576000000), int32(999999999), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_maxint_duration", false, []any{"q", int32(1), true, int64(9223372036), int32(854775807), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_maxint_plus_1ns", false, []any{"q", int32(1), true, int64(9223372036), int32(854775808), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_maxint_seconds", false, []any{"q", int32(1), true, int64(9223372036854775807), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_min_valid", false, []any{"q", int32(1), true, int64(-315576000000), int32(-999999999), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_minint_seconds", false, []any{"q", int32(1), true, int64(-9223372036854775808), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_minus_1ns", false, []any{"q", int32(1), true, int64(0), int32(-1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_minus_1s", false, []any{"q", int32(1), true, int64(-1), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_nanos_1e9", false, []any{"q", int32(1), true, int64(0), int32(1000000000), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_nanos_max_int32", false, []any{"q", int32(1), true, int64(0), int32(2147483647), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_nanos_minus_1e9", false, []any{"q", int32(1), true, int64(0), int32(-1000000000), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_nanos_sign_mismatch", false, []any{"q", int32(1), true, int64(1), int32(-1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_seconds_out_of_range", false, []any{"q", int32(1), true, int64(315576000001), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_seconds_sign_mismatch", false, []any{"q", int32(1), true, int64(-1), int32(1), false, int64(0), int32(0), byte(1), []byte("")}},
	{"visibility_zero", false, []any{"q", int32(1), true, int64(0), int32(0), false, int64(0), int32(0), byte(1), []byte("")}},
	{"wait_12h", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(43200), int32(0), byte(0), []byte("")}},
	{"wait_12h_1ns", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(43200), int32(1), byte(0), []byte("")}},
	{"wait_168h", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(604800), int32(0), byte(0), []byte("")}},
	{"wait_168h_1ns", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(604800), int32(1), byte(0), []byte("")}},
	{"wait_1h", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(3600), int32(0), byte(0), []byte("")}},
	{"wait_1h_1ns", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(3600), int32(1), byte(0), []byte("")}},
	{"wait_1m", true, []any{"q", int32(1), false, int64(0), int32(0), true, int64(60), int32(0), byte(0), []byte("")}},
	{"wait_1m_1ns", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(60), int32(1), byte(0), []byte("")}},
	{"wait_1ms", true, []any{"q", int32(1), false, int64(0), int32(0), true, int64(0), int32(1000000), byte(0), []byte("")}},
	{"wait_1ns", true, []any{"q", int32(1), false, int64(0), int32(0), true, int64(0), int32(1), byte(0), []byte("")}},
	{"wait_1s", true, []any{"q", int32(1), false, int64(0), int32(0), true, int64(1), int32(0), byte(0), []byte("")}},
	{"wait_24h", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(86400), int32(0), byte(0), []byte("")}},
	{"wait_24h_1ns", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(86400), int32(1), byte(0), []byte("")}},
	{"wait_5m", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(300), int32(0), byte(0), []byte("")}},
	{"wait_5m_1ns", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(300), int32(1), byte(0), []byte("")}},
	{"wait_just_under_1ms", true, []any{"q", int32(1), false, int64(0), int32(0), true, int64(0), int32(999999), byte(0), []byte("")}},
	{"wait_max_valid", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(315576000000), int32(999999999), byte(0), []byte("")}},
	{"wait_maxint_duration", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(9223372036), int32(854775807), byte(0), []byte("")}},
	{"wait_maxint_plus_1ns", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(9223372036), int32(854775808), byte(0), []byte("")}},
	{"wait_maxint_seconds", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(9223372036854775807), int32(0), byte(0), []byte("")}},
	{"wait_min_valid", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(-315576000000), int32(-999999999), byte(0), []byte("")}},
	{"wait_minint_seconds", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(-9223372036854775808), int32(0), byte(0), []byte("")}},
	{"wait_minus_1ns", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(0), int32(-1), byte(0), []byte("")}},
	{"wait_minus_1s", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(-1), int32(0), byte(0), []byte("")}},
	{"wait_nanos_1e9", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(0), int32(1000000000), byte(0), []byte("")}},
	{"wait_nanos_max_int32", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(0), int32(2147483647), byte(0), []byte("")}},
	{"wait_nanos_minus_1e9", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(0), int32(-1000000000), byte(0), []byte("")}},
	{"wait_nanos_sign_mismatch", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(1), int32(-1), byte(0), []byte("")}},
	{"wait_seconds_out_of_range", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(315576000001), int32(0), byte(0), []byte("")}},
	{"wait_seconds_sign_mismatch", false, []any{"q", int32(1), false, int64(0), int32(0), true, int64(-1), int32(1), byte(0), []byte("")}},
	{"wait_zero", true, []any{"q", int32(1), false, int64(0), int32(0), true, int64(0), int32(0), byte(0), []byte("")}},
}

func FuzzClaimRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzClaimSeeds)
	f.Fuzz(func(t *testing.T, queueName string, maxMessages int32, visSet bool, visS int64, visN int32,
		waitSet bool, waitS int64, waitN int32, prefill uint8, payload []byte) {
		seed := seedKey(queueName, maxMessages, visSet, visS, visN, waitSet, waitS, waitN, prefill, payload)
		known, bad := valid[seed], invalid[seed]
		e := newFuzzEnv(t)
		cfg := queue.DefaultConfig()
		n := 0 // messages enqueued
		// With one attempt each (prefill bit 2), a Nack makes a message dead.
		maxAttempts := int32(2 - btoi(prefill&4 != 0))
		for i := 0; i < int(prefill%4); i++ {
			_, code, _ := fuzzCall(e, "Enqueue", func() (*coordv1.EnqueueResponse, error) {
				return e.queues.Enqueue(e.ctx, &coordv1.EnqueueRequest{Queue: queueName, Payload: payload, MaxAttempts: maxAttempts})
			}, "queue", "payload")
			if code != codes.OK {
				break
			}
			n++
		}
		st, code, err := fuzzCall(e, "Stats", func() (*coordv1.StatsResponse, error) {
			return e.queues.Stats(e.ctx, &coordv1.StatsRequest{Queue: queueName})
		}, "queue")
		e.accepted(n > 0, "a queue name Enqueue took", "Stats", code, err, queueName)
		if code == codes.OK {
			e.must(st.GetReady() == int64(n) && st.GetDelayed()+st.GetInFlight()+st.GetDead() == 0, "Stats", "%v after %d enqueues", st, n)
		}
		// Nothing is dead yet: a Redrive moves nothing.
		redrive := &coordv1.RedriveRequest{Queue: queueName, MaxMessages: maxMessages}
		rd, redriveCode, _ := fuzzCall(e, "Redrive", func() (*coordv1.RedriveResponse, error) { return e.queues.Redrive(e.ctx, redrive) }, "queue", "max_messages")
		if redriveCode == codes.OK {
			e.must(rd.GetMoved() == 0, "Redrive", "max_messages %d: %v", maxMessages, rd)
		}

		req := &coordv1.ClaimRequest{Queue: queueName, MaxMessages: maxMessages,
			VisibilityTimeout: dur(visSet, visS, visN), Wait: dur(waitSet, waitS, waitN)}
		resp, code, err := fuzzCall(e, "Claim", func() (*coordv1.ClaimResponse, error) { return e.queues.Claim(e.ctx, req) },
			"queue", "max_messages", "visibility_timeout", "wait")
		e.accepted(known, "a valid seed", "Claim", code, err, req)
		e.refused(bad, "Claim", code, err, req)
		if code != codes.OK {
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
		rd, code, err = fuzzCall(e, "Redrive", func() (*coordv1.RedriveResponse, error) { return e.queues.Redrive(e.ctx, redrive) }, "queue", "max_messages")
		e.accepted(redriveCode != codes.InvalidArgument, "accepted the first time", "Redrive", code, err, redrive)
		if code == codes.OK {
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

var fuzzReceiptSeeds = []fuzzSeed{
	{"ack_attempt_0", false, []any{"q", "0123456789abcdef0123456789abcdef000000000123456789abcdef0123456789abcdef", false, byte(0), false, int64(0), int32(0), ""}},
	{"ack_batch_100", false, []any{"q", "", true, byte(1), false, int64(0), int32(0), strings.Repeat("0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef,", 96) + "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef"}},
	{"ack_batch_101", false, []any{"q", "", true, byte(1), false, int64(0), int32(0), strings.Repeat("0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef,", 99) + "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef"}},
	{"ack_batch_attempt_0", false, []any{"q", "0123456789abcdef0123456789abcdef000000000123456789abcdef0123456789abcdef", false, byte(1), false, int64(0), int32(0), ""}},
	{"ack_batch_duplicates", false, []any{"q", "", true, byte(1), false, int64(0), int32(0), "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef,0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef"}},
	{"ack_batch_empty", false, []any{"q", "", false, byte(1), false, int64(0), int32(0), ""}},
	{"ack_batch_empty_entry", false, []any{"q", "", true, byte(1), false, int64(0), int32(0), ","}},
	{"ack_batch_invalid_utf8", false, []any{"q", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", false, byte(1), false, int64(0), int32(0), ""}},
	{"ack_batch_pipe", false, []any{"q", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcde|", false, byte(1), false, int64(0), int32(0), ""}},
	{"ack_batch_queue_invalid", false, []any{"a\x00", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", true, byte(1), false, int64(0), int32(0), ""}},
	{"ack_batch_real", false, []any{"q", "", true, byte(1), true, int64(1), int32(0), ""}},
	{"ack_batch_real_no_delay", false, []any{"q", "", true, byte(1), false, int64(0), int32(0), ""}},
	{"ack_batch_uppercase", false, []any{"q", "A123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", false, byte(1), false, int64(0), int32(0), ""}},
	{"ack_batch_wellformed_unknown", true, []any{"q", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", false, byte(1), true, int64(1), int32(0), ""}},
	{"ack_empty", false, []any{"q", "", false, byte(0), false, int64(0), int32(0), ""}},
	{"ack_invalid_utf8", false, []any{"q", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", false, byte(0), false, int64(0), int32(0), ""}},
	{"ack_pipe", false, []any{"q", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcde|", false, byte(0), false, int64(0), int32(0), ""}},
	{"ack_queue_invalid", false, []any{"a\x00", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", true, byte(0), false, int64(0), int32(0), ""}},
	{"ack_real", true, []any{"q", "", true, byte(0), true, int64(1), int32(0), ""}},
	{"ack_real_no_delay", true, []any{"q", "", true, byte(0), false, int64(0), int32(0), ""}},
	{"ack_uppercase", false, []any{"q", "A123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", false, byte(0), false, int64(0), int32(0), ""}},
	{"ack_wellformed_unknown", true, []any{"q", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", false, byte(0), true, int64(1), int32(0), ""}},
	{"extend_12h", true, []any{"q", "", true, byte(3), true, int64(43200), int32(0), ""}},
	{"extend_12h_1ns", false, []any{"q", "", true, byte(3), true, int64(43200), int32(1), ""}},
	{"extend_168h", false, []any{"q", "", true, byte(3), true, int64(604800), int32(0), ""}},
	{"extend_168h_1ns", false, []any{"q", "", true, byte(3), true, int64(604800), int32(1), ""}},
	{"extend_1h", true, []any{"q", "", true, byte(3), true, int64(3600), int32(0), ""}},
	{"extend_1h_1ns", true, []any{"q", "", true, byte(3), true, int64(3600), int32(1), ""}},
	{"extend_1m", true, []any{"q", "", true, byte(3), true, int64(60), int32(0), ""}},
	{"extend_1m_1ns", true, []any{"q", "", true, byte(3), true, int64(60), int32(1), ""}},
	{"extend_1ms", true, []any{"q", "", true, byte(3), true, int64(0), int32(1000000), ""}},
	{"extend_1ns", false, []any{"q", "", true, byte(3), true, int64(0), int32(1), ""}},
	{"extend_1s", true, []any{"q", "", true, byte(3), true, int64(1), int32(0), ""}},
	{"extend_24h", false, []any{"q", "", true, byte(3), true, int64(86400), int32(0), ""}},
	{"extend_24h_1ns", false, []any{"q", "", true, byte(3), true, int64(86400), int32(1), ""}},
	{"extend_5m", true, []any{"q", "", true, byte(3), true, int64(300), int32(0), ""}},
	{"extend_5m_1ns", true, []any{"q", "", true, byte(3), true, int64(300), int32(1), ""}},
	{"extend_attempt_0", false, []any{"q", "0123456789abcdef0123456789abcdef000000000123456789abcdef0123456789abcdef", false, byte(3), false, int64(0), int32(0), ""}},
	{"extend_empty", false, []any{"q", "", false, byte(3), false, int64(0), int32(0), ""}},
	{"extend_invalid_utf8", false, []any{"q", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", false, byte(3), false, int64(0), int32(0), ""}},
	{"extend_just_under_1ms", false, []any{"q", "", true, byte(3), true, int64(0), int32(999999), ""}},
	{"extend_max_valid", false, []any{"q", "", true, byte(3), true, int64(315576000000), int32(999999999), ""}},
	{"extend_maxint_duration", false, []any{"q", "", true, byte(3), true, int64(9223372036), int32(854775807), ""}},
	{"extend_maxint_plus_1ns", false, []any{"q", "", true, byte(3), true, int64(9223372036), int32(854775808), ""}},
	{"extend_maxint_seconds", false, []any{"q", "", true, byte(3), true, int64(9223372036854775807), int32(0), ""}},
	{"extend_min_valid", false, []any{"q", "", true, byte(3), true, int64(-315576000000), int32(-999999999), ""}},
	{"extend_minint_seconds", false, []any{"q", "", true, byte(3), true, int64(-9223372036854775808), int32(0), ""}},
	{"extend_minus_1ns", false, []any{"q", "", true, byte(3), true, int64(0), int32(-1), ""}},
	{"extend_minus_1s", false, []any{"q", "", true, byte(3), true, int64(-1), int32(0), ""}},
	{"extend_nanos_1e9", false, []any{"q", "", true, byte(3), true, int64(0), int32(1000000000), ""}},
	{"extend_nanos_max_int32", false, []any{"q", "", true, byte(3), true, int64(0), int32(2147483647), ""}},
	{"extend_nanos_minus_1e9", false, []any{"q", "", true, byte(3), true, int64(0), int32(-1000000000), ""}},
	{"extend_nanos_sign_mismatch", false, []any{"q", "", true, byte(3), true, int64(1), int32(-1), ""}},
	{"extend_pipe", false, []any{"q", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcde|", false, byte(3), false, int64(0), int32(0), ""}},
	{"extend_queue_invalid", false, []any{"a\x00", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", true, byte(3), false, int64(0), int32(0), ""}},
	{"extend_real", true, []any{"q", "", true, byte(3), true, int64(1), int32(0), ""}},
	{"extend_real_no_delay", false, []any{"q", "", true, byte(3), false, int64(0), int32(0), ""}},
	{"extend_seconds_out_of_range", false, []any{"q", "", true, byte(3), true, int64(315576000001), int32(0), ""}},
	{"extend_seconds_sign_mismatch", false, []any{"q", "", true, byte(3), true, int64(-1), int32(1), ""}},
	{"extend_uppercase", false, []any{"q", "A123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", false, byte(3), false, int64(0), int32(0), ""}},
	{"extend_wellformed_unknown", true, []any{"q", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", false, byte(3), true, int64(1), int32(0), ""}},
	{"extend_zero", false, []any{"q", "", true, byte(3), true, int64(0), int32(0), ""}},
	{"nack_12h", true, []any{"q", "", true, byte(2), true, int64(43200), int32(0), ""}},
	{"nack_12h_1ns", true, []any{"q", "", true, byte(2), true, int64(43200), int32(1), ""}},
	{"nack_168h", true, []any{"q", "", true, byte(2), true, int64(604800), int32(0), ""}},
	{"nack_168h_1ns", false, []any{"q", "", true, byte(2), true, int64(604800), int32(1), ""}},
	{"nack_1h", true, []any{"q", "", true, byte(2), true, int64(3600), int32(0), ""}},
	{"nack_1h_1ns", true, []any{"q", "", true, byte(2), true, int64(3600), int32(1), ""}},
	{"nack_1m", true, []any{"q", "", true, byte(2), true, int64(60), int32(0), ""}},
	{"nack_1m_1ns", true, []any{"q", "", true, byte(2), true, int64(60), int32(1), ""}},
	{"nack_1ms", true, []any{"q", "", true, byte(2), true, int64(0), int32(1000000), ""}},
	{"nack_1ns", true, []any{"q", "", true, byte(2), true, int64(0), int32(1), ""}},
	{"nack_1s", true, []any{"q", "", true, byte(2), true, int64(1), int32(0), ""}},
	{"nack_24h", true, []any{"q", "", true, byte(2), true, int64(86400), int32(0), ""}},
	{"nack_24h_1ns", true, []any{"q", "", true, byte(2), true, int64(86400), int32(1), ""}},
	{"nack_5m", true, []any{"q", "", true, byte(2), true, int64(300), int32(0), ""}},
	{"nack_5m_1ns", true, []any{"q", "", true, byte(2), true, int64(300), int32(1), ""}},
	{"nack_attempt_0", false, []any{"q", "0123456789abcdef0123456789abcdef000000000123456789abcdef0123456789abcdef", false, byte(2), false, int64(0), int32(0), ""}},
	{"nack_empty", false, []any{"q", "", false, byte(2), false, int64(0), int32(0), ""}},
	{"nack_invalid_utf8", false, []any{"q", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", false, byte(2), false, int64(0), int32(0), ""}},
	{"nack_just_under_1ms", true, []any{"q", "", true, byte(2), true, int64(0), int32(999999), ""}},
	{"nack_max_valid", false, []any{"q", "", true, byte(2), true, int64(315576000000), int32(999999999), ""}},
	{"nack_maxint_duration", false, []any{"q", "", true, byte(2), true, int64(9223372036), int32(854775807), ""}},
	{"nack_maxint_plus_1ns", false, []any{"q", "", true, byte(2), true, int64(9223372036), int32(854775808), ""}},
	{"nack_maxint_seconds", false, []any{"q", "", true, byte(2), true, int64(9223372036854775807), int32(0), ""}},
	{"nack_min_valid", false, []any{"q", "", true, byte(2), true, int64(-315576000000), int32(-999999999), ""}},
	{"nack_minint_seconds", false, []any{"q", "", true, byte(2), true, int64(-9223372036854775808), int32(0), ""}},
	{"nack_minus_1ns", false, []any{"q", "", true, byte(2), true, int64(0), int32(-1), ""}},
	{"nack_minus_1s", false, []any{"q", "", true, byte(2), true, int64(-1), int32(0), ""}},
	{"nack_nanos_1e9", false, []any{"q", "", true, byte(2), true, int64(0), int32(1000000000), ""}},
	{"nack_nanos_max_int32", false, []any{"q", "", true, byte(2), true, int64(0), int32(2147483647), ""}},
	{"nack_nanos_minus_1e9", false, []any{"q", "", true, byte(2), true, int64(0), int32(-1000000000), ""}},
	{"nack_nanos_sign_mismatch", false, []any{"q", "", true, byte(2), true, int64(1), int32(-1), ""}},
	{"nack_pipe", false, []any{"q", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcde|", false, byte(2), false, int64(0), int32(0), ""}},
	{"nack_queue_invalid", false, []any{"a\x00", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", true, byte(2), false, int64(0), int32(0), ""}},
	{"nack_real", true, []any{"q", "", true, byte(2), true, int64(1), int32(0), ""}},
	{"nack_real_no_delay", true, []any{"q", "", true, byte(2), false, int64(0), int32(0), ""}},
	{"nack_seconds_out_of_range", false, []any{"q", "", true, byte(2), true, int64(315576000001), int32(0), ""}},
	{"nack_seconds_sign_mismatch", false, []any{"q", "", true, byte(2), true, int64(-1), int32(1), ""}},
	{"nack_uppercase", false, []any{"q", "A123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", false, byte(2), false, int64(0), int32(0), ""}},
	{"nack_wellformed_unknown", true, []any{"q", "0123456789abcdef0123456789abcdef000000010123456789abcdef0123456789abcdef", false, byte(2), true, int64(1), int32(0), ""}},
	{"nack_zero", true, []any{"q", "", true, byte(2), true, int64(0), int32(0), ""}},
}

// FuzzReceiptRequest: Ack, Nack and Extend with fuzzed receipts (or the
// receipts of real claims), queue names and durations.
func FuzzReceiptRequest(f *testing.F) {
	valid, _ := addSeeds(f, fuzzReceiptSeeds)
	f.Fuzz(func(t *testing.T, queueName, receipt string, realReceipt bool, op uint8, delaySet bool, delayS int64, delayN int32, more string) {
		// The op decides which call is the main request: only the valid
		// seeds' direction is checked here.
		known := valid[seedKey(queueName, receipt, realReceipt, op, delaySet, delayS, delayN, more)]
		e := newFuzzEnv(t)
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
			resp, code, err := fuzzCall(e, "Ack", func() (*coordv1.AckResponse, error) { return e.queues.Ack(e.ctx, req) }, "queue", "receipt", "receipts")
			e.accepted(known, "a valid seed", "Ack", code, err, req)
			e.accepted(slices.Contains(real, receipt), "a receipt Claim returned, on its queue", "Ack", code, err, req)
			live(code, receipt, resp)
			e.must(code != codes.OK || resp.GetAcked(), "Ack", "receipt %q: %v", receipt, resp)
		case 1:
			// Several receipts: the real ones, the fuzzed one, and those in
			// more (split at ','), duplicates included.
			rs := append(slices.Clone(real), receipt)
			if more != "" {
				rs = append(rs, splitComma(more)...)
			}
			fields := []string{"queue", "receipts"}
			for i := range rs {
				fields = append(fields, fmt.Sprintf("receipts[%d]", i))
			}
			req := &coordv1.AckRequest{Queue: queueName, Receipts: rs}
			resp, code, err := fuzzCall(e, "Ack", func() (*coordv1.AckResponse, error) { return e.queues.Ack(e.ctx, req) }, fields...)
			e.accepted(known, "a valid seed", "Ack", code, err, req)
			if code == codes.OK {
				e.must(int(resp.GetAckedCount())+len(resp.GetExpiredReceipts()) == len(rs) &&
					int(resp.GetAckedCount()) <= len(real) && resp.GetAcked() == (len(resp.GetExpiredReceipts()) == 0),
					"Ack", "receipts %q (of which real %q): %v", rs, real, resp)
			}
		case 2:
			req := &coordv1.NackRequest{Queue: queueName, Receipt: receipt, Delay: d}
			resp, code, err := fuzzCall(e, "Nack", func() (*coordv1.NackResponse, error) { return e.queues.Nack(e.ctx, req) }, "queue", "receipt", "delay")
			e.accepted(known, "a valid seed", "Nack", code, err, req)
			live(code, receipt, resp)
			e.must(code != codes.OK || !resp.GetDeadLettered(), "Nack", "receipt %q, delay %v: %v", receipt, d, resp)
		default:
			req := &coordv1.ExtendRequest{Queue: queueName, Receipt: receipt, VisibilityTimeout: d}
			resp, code, err := fuzzCall(e, "Extend", func() (*coordv1.ExtendResponse, error) { return e.queues.Extend(e.ctx, req) },
				"queue", "receipt", "visibility_timeout")
			e.accepted(known, "a valid seed", "Extend", code, err, req)
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

var fuzzKeepAliveSeeds = []fuzzSeed{
	{"open_close", true, []any{"", byte(0), false, int64(0), int32(0), "", true}},
	{"open_keepalive_twice", true, []any{"", byte(2), true, int64(10), int32(0), "", true}},
	{"open_ttl_every_message", true, []any{"", byte(6), true, int64(10), int32(0), "", true}},
	{"other_session", false, []any{"", byte(1), false, int64(0), int32(0), "0123456789abcdef0123456789abcdef", false}},
	{"other_session_empty", true, []any{"", byte(1), false, int64(0), int32(0), "", false}},
	{"resume_invalid_utf8", false, []any{"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", byte(0), false, int64(0), int32(0), "", true}},
	{"resume_malformed", false, []any{"nope", byte(0), false, int64(0), int32(0), "", true}},
	{"resume_unknown", true, []any{"0123456789abcdef0123456789abcdef", byte(0), false, int64(0), int32(0), "", true}},
	{"ttl_12h", false, []any{"", byte(5), true, int64(43200), int32(0), "", true}},
	{"ttl_12h_1ns", false, []any{"", byte(5), true, int64(43200), int32(1), "", true}},
	{"ttl_168h", false, []any{"", byte(5), true, int64(604800), int32(0), "", true}},
	{"ttl_168h_1ns", false, []any{"", byte(5), true, int64(604800), int32(1), "", true}},
	{"ttl_1h", false, []any{"", byte(5), true, int64(3600), int32(0), "", true}},
	{"ttl_1h_1ns", false, []any{"", byte(5), true, int64(3600), int32(1), "", true}},
	{"ttl_1m", true, []any{"", byte(5), true, int64(60), int32(0), "", true}},
	{"ttl_1m_1ns", true, []any{"", byte(5), true, int64(60), int32(1), "", true}},
	{"ttl_1ms", false, []any{"", byte(5), true, int64(0), int32(1000000), "", true}},
	{"ttl_1ns", false, []any{"", byte(5), true, int64(0), int32(1), "", true}},
	{"ttl_1s", true, []any{"", byte(5), true, int64(1), int32(0), "", true}},
	{"ttl_24h", false, []any{"", byte(5), true, int64(86400), int32(0), "", true}},
	{"ttl_24h_1ns", false, []any{"", byte(5), true, int64(86400), int32(1), "", true}},
	{"ttl_5m", true, []any{"", byte(5), true, int64(300), int32(0), "", true}},
	{"ttl_5m_1ns", false, []any{"", byte(5), true, int64(300), int32(1), "", true}},
	{"ttl_just_under_1ms", false, []any{"", byte(5), true, int64(0), int32(999999), "", true}},
	{"ttl_max_valid", false, []any{"", byte(5), true, int64(315576000000), int32(999999999), "", true}},
	{"ttl_maxint_duration", false, []any{"", byte(5), true, int64(9223372036), int32(854775807), "", true}},
	{"ttl_maxint_plus_1ns", false, []any{"", byte(5), true, int64(9223372036), int32(854775808), "", true}},
	{"ttl_maxint_seconds", false, []any{"", byte(5), true, int64(9223372036854775807), int32(0), "", true}},
	{"ttl_min_valid", false, []any{"", byte(5), true, int64(-315576000000), int32(-999999999), "", true}},
	{"ttl_minint_seconds", false, []any{"", byte(5), true, int64(-9223372036854775808), int32(0), "", true}},
	{"ttl_minus_1ns", false, []any{"", byte(5), true, int64(0), int32(-1), "", true}},
	{"ttl_minus_1s", false, []any{"", byte(5), true, int64(-1), int32(0), "", true}},
	{"ttl_nanos_1e9", false, []any{"", byte(5), true, int64(0), int32(1000000000), "", true}},
	{"ttl_nanos_max_int32", false, []any{"", byte(5), true, int64(0), int32(2147483647), "", true}},
	{"ttl_nanos_minus_1e9", false, []any{"", byte(5), true, int64(0), int32(-1000000000), "", true}},
	{"ttl_nanos_sign_mismatch", false, []any{"", byte(5), true, int64(1), int32(-1), "", true}},
	{"ttl_seconds_out_of_range", false, []any{"", byte(5), true, int64(315576000001), int32(0), "", true}},
	{"ttl_seconds_sign_mismatch", false, []any{"", byte(5), true, int64(-1), int32(1), "", true}},
	{"ttl_zero", false, []any{"", byte(5), true, int64(0), int32(0), "", true}},
}

// FuzzKeepAliveRequest runs a KeepAlive stream of up to three requests: the
// first opens a session (or resumes the fuzzed one), the others name the
// stream's session, none, or another; each may set a TTL.
func FuzzKeepAliveRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzKeepAliveSeeds)
	f.Fuzz(func(t *testing.T, id string, msgs uint8, ttlSet bool, ttlS int64, ttlN int32, id2 string, same bool) {
		seed := seedKey(id, msgs, ttlSet, ttlS, ttlN, id2, same)
		known, bad := valid[seed], invalid[seed]
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
		before := e.store.CallCounts()
		err := e.sessions.KeepAlive(stream)
		cancel()
		code := e.check("KeepAlive", &coordv1.KeepAliveResponse{}, err, "session_id", "ttl")
		e.accepted(known, "a valid seed", "KeepAlive", code, err, reqs)
		e.refused(bad, "KeepAlive", code, err, reqs)
		stream.mu.Lock()
		sent := stream.sent
		stream.mu.Unlock()

		// The stream ends at its first bad request, each request before it
		// answered: a refused one (INVALID_ARGUMENT), or a first one that
		// resumes a session the store (fresh) does not have
		// (FAILED_PRECONDITION). A refused first request reached no store.
		switch code {
		case codes.OK:
			e.must(len(sent) == n, "KeepAlive", "stream %v: %d responses, want %d: %v", reqs, len(sent), n, sent)
		case codes.FailedPrecondition:
			if len(sent) != 0 || reqs[0].SessionId == "" {
				t.Fatalf("KeepAlive stream %v: %v (%v) after %d responses", reqs, code, err, len(sent))
			}
		case codes.InvalidArgument:
			if len(sent) >= n {
				t.Fatalf("KeepAlive stream %v: %v (%v) after every request was answered: %v", reqs, code, err, sent)
			}
			if made := e.store.CallsSince(before); len(sent) == 0 && len(made) > 0 {
				t.Fatalf("KeepAlive stream %v: INVALID_ARGUMENT (%v) on its first request, after store calls: %s", reqs, err, strings.Join(made, ", "))
			}
		default:
			t.Fatalf("KeepAlive stream %v: %v (%v), want OK, INVALID_ARGUMENT or FAILED_PRECONDITION", reqs, code, err)
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
