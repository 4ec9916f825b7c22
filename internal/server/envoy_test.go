package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/coordd/coordd/internal/envoyrl"
)

// envoyConf is an envoy ratelimit configuration of the tests: a fixed
// window a minute, and coordd's token bucket.
const envoyConf = `domain: web
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket}
`

func withEnvoy(t testing.TB, conf string) func(*config) {
	c, err := envoyrl.Parse(map[string][]byte{"web.yaml": []byte(conf)})
	if err != nil {
		t.Fatal(err)
	}
	return func(cfg *config) { cfg.services.Envoy = c }
}

func (h *harness) rls() rlsv3.RateLimitServiceClient { return rlsv3.NewRateLimitServiceClient(h.conn) }

func rlsReq(domain string, kv ...string) *rlsv3.RateLimitRequest {
	d := &commonrl.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonrl.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*commonrl.RateLimitDescriptor{d}}
}

// shouldRateLimit calls ShouldRateLimit and returns its one status.
func shouldRateLimit(t testing.TB, c context.Context, cl rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse_DescriptorStatus {
	t.Helper()
	r, err := cl.ShouldRateLimit(c, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	if len(r.GetStatuses()) != 1 || (r.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT) != (r.GetStatuses()[0].GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT) {
		t.Fatalf("ShouldRateLimit(%v) = %v: want one status, agreeing with the overall code", req, r)
	}
	return r.GetStatuses()[0]
}

// TestShouldRateLimit: envoy ratelimit's fixed window of a minute (the
// hits of a request over the limit count: the fifth call sees 5 > 3), the
// window's reset to the second by the store's clock, a new window; and a
// token bucket (coordd's algorithm:), whose denial consumes nothing.
func TestShouldRateLimit(t *testing.T) {
	h := newHarness(t, withFakeClock, withEnvoy(t, envoyConf))
	cl, c := h.rls(), ctx(t)
	h.clock.Advance(15 * time.Second) // 45s before the minute ends (epoch is on a minute)
	for i, want := range []struct {
		code rlsv3.RateLimitResponse_Code
		left uint32
	}{{rlsv3.RateLimitResponse_OK, 2}, {rlsv3.RateLimitResponse_OK, 1}, {rlsv3.RateLimitResponse_OK, 0}, {rlsv3.RateLimitResponse_OVER_LIMIT, 0}} {
		st := shouldRateLimit(t, c, cl, rlsReq("web", "remote_address", "10.0.0.1"))
		if st.GetCode() != want.code || st.GetLimitRemaining() != want.left || st.GetDurationUntilReset().AsDuration() != 45*time.Second ||
			st.GetCurrentLimit().GetRequestsPerUnit() != 3 || st.GetCurrentLimit().GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("call %d: %v, want %v with %d left, 45s to the reset, 3 a minute", i+1, st, want.code, want.left)
		}
	}
	if st := shouldRateLimit(t, c, cl, rlsReq("web", "remote_address", "10.0.0.2")); st.GetCode() != rlsv3.RateLimitResponse_OK || st.GetLimitRemaining() != 2 {
		t.Fatalf("another address: %v, want its own counter", st)
	}
	h.clock.Advance(45 * time.Second)
	if st := shouldRateLimit(t, c, cl, rlsReq("web", "remote_address", "10.0.0.1")); st.GetCode() != rlsv3.RateLimitResponse_OK || st.GetLimitRemaining() != 2 ||
		st.GetDurationUntilReset().AsDuration() != time.Minute {
		t.Fatalf("next window: %v, want OK with 2 left and a minute to the reset", st)
	}

	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if st := shouldRateLimit(t, c, cl, rlsReq("web", "bucket", "b")); st.GetCode() != want {
			t.Fatalf("bucket call %d: %v, want %v", i+1, st, want)
		} else if want == rlsv3.RateLimitResponse_OVER_LIMIT && st.GetDurationUntilReset().AsDuration() != 500*time.Millisecond {
			t.Fatalf("bucket call %d: %v, want the time until a token: 500ms", i+1, st)
		}
	}
	h.clock.Advance(500 * time.Millisecond) // one token, and the denials took none
	if st := shouldRateLimit(t, c, cl, rlsReq("web", "bucket", "b")); st.GetCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("bucket after 500ms: %v, want OK", st)
	}
}

// TestShouldRateLimitNamespaces: API keys apply, and each namespace counts
// apart; the metrics name the domain and the descriptor's keys, never a
// value, and an unconfigured domain as "unknown".
func TestShouldRateLimitNamespaces(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withAuth(twoTenants(t)), withMetrics(&reg), withEnvoy(t, envoyConf))
	cl := h.rls()
	_, err := cl.ShouldRateLimit(ctx(t), rlsReq("web", "remote_address", "10.0.0.1"))
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	for range 4 {
		shouldRateLimit(t, as(t, keyA), cl, rlsReq("web", "remote_address", "10.0.0.1"))
	}
	if st := shouldRateLimit(t, as(t, keyB), cl, rlsReq("web", "remote_address", "10.0.0.1")); st.GetCode() != rlsv3.RateLimitResponse_OK || st.GetLimitRemaining() != 2 {
		t.Fatalf("the other namespace's first call: %v, want OK with 2 left", st)
	}
	shouldRateLimit(t, as(t, keyB), cl, rlsReq("elsewhere", "remote_address", "10.0.0.1"))
	const name = "coordd_envoy_ratelimit_decisions_total"
	for _, want := range []struct {
		labels []string
		n      float64
	}{
		{[]string{"domain", "web", "descriptor", "web.remote_address", "outcome", "ok"}, 4},
		{[]string{"domain", "web", "descriptor", "web.remote_address", "outcome", "over_limit"}, 1},
		{[]string{"domain", "unknown", "descriptor", "", "outcome", "no_limit"}, 1},
	} {
		if n := counterValue(t, reg, name, want.labels...); n != want.n {
			t.Errorf("%s%q = %v, want %v", name, want.labels, n, want.n)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "10.0.0.1") || l.GetValue() == "elsewhere" {
					t.Errorf("%s has a descriptor's value or an unconfigured domain: %v", mf.GetName(), m)
				}
			}
		}
	}
}

// TestShouldRateLimitBadInput: INVALID_ARGUMENT naming the field (envoy
// ratelimit answers UNKNOWN, or panics on an override without a unit),
// nothing counted; without a configuration FAILED_PRECONDITION.
func TestShouldRateLimitBadInput(t *testing.T) {
	h := newHarness(t, withEnvoy(t, envoyConf))
	cl := h.rls()
	withDesc := func(f func(d *commonrl.RateLimitDescriptor)) *rlsv3.RateLimitRequest {
		r := rlsReq("web", "remote_address", "10.0.0.1")
		f(r.Descriptors[0])
		return r
	}
	for _, tc := range []struct {
		name, field string
		req         *rlsv3.RateLimitRequest
	}{
		{"no domain", "domain", rlsReq("", "remote_address", "10.0.0.1")},
		{"no descriptors", "descriptors", &rlsv3.RateLimitRequest{Domain: "web"}},
		{"override without a unit", "descriptors[0].limit.unit", withDesc(func(d *commonrl.RateLimitDescriptor) {
			d.Limit = &commonrl.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_UNKNOWN}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.ShouldRateLimit(ctx(t), tc.req)
			st := wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
			var field string
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
					field = br.GetFieldViolations()[0].GetField()
				}
			}
			if field != tc.field {
				t.Fatalf("%v: the field named is %q, want %q", st.Message(), field, tc.field)
			}
		})
	}
	if st := shouldRateLimit(t, ctx(t), cl, rlsReq("web", "remote_address", "10.0.0.1")); st.GetLimitRemaining() != 2 {
		t.Fatalf("after the bad requests: %v, want nothing counted (2 left after this one)", st)
	}

	bare := newHarness(t)
	_, err := bare.rls().ShouldRateLimit(ctx(t), rlsReq("web", "remote_address", "10.0.0.1"))
	wantStatus(t, err, codes.FailedPrecondition, "ENVOY_CONFIG_UNSET")
}

// TestShouldRateLimitLargeInput: what envoy ratelimit counts is counted,
// never refused (a refusal lets Envoy's failure_mode_deny: false pass the
// request, every limit of it skipped): 100 descriptors (more than one
// CountHits), a value of 9 KB (its counter stored under its SHA-256, apart
// from another long value), a hits_addend of 2^40 (over the limit, as its
// full number would be), is_negative_hits (added, as envoy ratelimit adds
// it).
func TestShouldRateLimitLargeInput(t *testing.T) {
	h := newHarness(t, withEnvoy(t, envoyConf))
	cl, c := h.rls(), ctx(t)
	many := &rlsv3.RateLimitRequest{Domain: "web"}
	for i := range 100 {
		many.Descriptors = append(many.Descriptors, rlsReq("web", "remote_address", fmt.Sprintf("10.1.0.%d", i%50)).Descriptors[0])
	}
	r, err := cl.ShouldRateLimit(c, many)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range r.GetStatuses() {
		if want := uint32(3 - 1 - i/50); st.GetLimitRemaining() != want { // each address twice: 2 left, then 1
			t.Fatalf("descriptor %d: %v, want %d left", i, st, want)
		}
	}
	if len(r.GetStatuses()) != 100 {
		t.Fatalf("%d statuses for 100 descriptors", len(r.GetStatuses()))
	}

	long := strings.Repeat("x", 9<<10)
	for i, want := range []uint32{2, 1} {
		if st := shouldRateLimit(t, c, cl, rlsReq("web", "remote_address", long)); st.GetLimitRemaining() != want {
			t.Fatalf("a 9 KB value, call %d: %v, want %d left", i+1, st, want)
		}
	}
	if st := shouldRateLimit(t, c, cl, rlsReq("web", "remote_address", long+"y")); st.GetLimitRemaining() != 2 {
		t.Fatalf("another long value: %v, want its own counter", st)
	}

	huge := rlsReq("web", "remote_address", "10.2.0.1")
	huge.Descriptors[0].HitsAddend = wrapperspb.UInt64(1 << 40)
	if st := shouldRateLimit(t, c, cl, huge); st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("hits_addend 2^40: %v, want OVER_LIMIT", st)
	}
	neg := rlsReq("web", "remote_address", "10.2.0.2")
	neg.Descriptors[0].HitsAddend, neg.Descriptors[0].IsNegativeHits = wrapperspb.UInt64(2), true
	if st := shouldRateLimit(t, c, cl, neg); st.GetLimitRemaining() != 1 {
		t.Fatalf("is_negative_hits with 2 hits: %v, want them added (1 left), as envoy ratelimit does", st)
	}
}
