package main

// Side by side with the real thing: envoy ratelimit's own server (the
// pinned version, built by go install in its own module) and coordd, on
// one Redis that the test starts, with the same YAML configuration, get
// the same sequences of ShouldRateLimit requests; every response must be
// equal, field by field (the overall code, each status's code, current
// limit, limit_remaining and duration_until_reset to the second). Then
// envoy ratelimit's own client (src/client_cmd) asks coordd.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/google/go-cmp/cmp"

	"github.com/coordd/coordd/internal/redistest"
)

// parityConfig uses every feature of envoy ratelimit's configuration that
// changes a decision.
const parityConfig = `domain: parity
descriptors:
  - key: generic_key
    value: per_second
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: generic_key
    value: per_minute
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: path
    value: "/api/*"
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tenant
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: hour, requests_per_unit: 3}
      - key: plan
        value: gold
        rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2, name: per_user}
  - key: vip
    rate_limit:
      unit: minute
      requests_per_unit: 4
      replaces:
        - name: per_user
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: overridable
    rate_limit: {unit: day, requests_per_unit: 50}
  - key: files
    value: "/files/*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
`

// parityStep is one request, sent n times.
type parityStep struct {
	req *rlsv3.RateLimitRequest
	n   int
}

func desc(kv ...string) *commonrl.RateLimitDescriptor {
	d := &commonrl.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonrl.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func rlReq(domain string, hits uint32, ds ...*commonrl.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits}
}

// parityScenario is a sequence of steps and how many of its answers are
// OVER_LIMIT overall (so that two servers that agree on nothing but OK
// fail the test).
type parityScenario struct {
	steps []parityStep
	over  int
}

// parityScenarios: each runs from a fresh start of its counters (their
// descriptors are used by no other scenario).
func parityScenarios() map[string]parityScenario {
	withHits := func(d *commonrl.RateLimitDescriptor, h uint64) *commonrl.RateLimitDescriptor {
		d.HitsAddend = wrapperspb.UInt64(h)
		return d
	}
	override := func(d *commonrl.RateLimitDescriptor, n uint32, unit typev3.RateLimitUnit) *commonrl.RateLimitDescriptor {
		d.Limit = &commonrl.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
		return d
	}
	return map[string]parityScenario{
		"fixed window of a second": {[]parityStep{{rlReq("parity", 0, desc("generic_key", "per_second")), 5}}, 2},
		"hits_addend":              {[]parityStep{{rlReq("parity", 2, desc("generic_key", "per_minute")), 4}}, 2},
		"value-less key": {[]parityStep{
			{rlReq("parity", 0, desc("remote_address", "10.0.0.1")), 5},
			{rlReq("parity", 0, desc("remote_address", "10.0.0.2")), 1},
		}, 1},
		"wildcard": {[]parityStep{
			{rlReq("parity", 0, desc("path", "/api/v1")), 3},
			{rlReq("parity", 0, desc("path", "/api/v2")), 2},
			{rlReq("parity", 0, desc("path", "/other")), 1},
		}, 1},
		"nested and unlimited": {[]parityStep{
			{rlReq("parity", 0, desc("tenant", "a", "plan", "free")), 4},
			{rlReq("parity", 0, desc("tenant", "b", "plan", "gold")), 2},
			{rlReq("parity", 0, desc("tenant", "a")), 1},
		}, 1},
		"shadow_mode": {[]parityStep{{rlReq("parity", 0, desc("shadow", "s")), 3}}, 0},
		"replaces": {[]parityStep{
			{rlReq("parity", 0, desc("user", "u1")), 3},
			{rlReq("parity", 0, desc("user", "u2"), desc("vip", "yes")), 6},
		}, 3},
		"quota_mode": {[]parityStep{{rlReq("parity", 0, desc("quota", "q")), 3}}, 0},
		"request limit override": {[]parityStep{
			{rlReq("parity", 0, override(desc("overridable", "o"), 2, typev3.RateLimitUnit_MINUTE)), 3},
			{rlReq("parity", 0, override(desc("unconfigured", "x"), 1, typev3.RateLimitUnit_HOUR)), 2},
		}, 2},
		"descriptor hits_addend and several descriptors": {[]parityStep{
			{rlReq("parity", 1, withHits(desc("remote_address", "10.0.0.9"), 3), desc("path", "/api/x"), withHits(desc("user", "u9"), 0)), 2},
			{rlReq("parity", 0, withHits(desc("remote_address", "10.0.0.9"), 0)), 1},
		}, 2},
		"unknown domain": {[]parityStep{{rlReq("nobody", 0, desc("generic_key", "per_second")), 2}}, 0},
		"share_threshold": {[]parityStep{
			{rlReq("parity", 0, desc("files", "/files/a")), 2},
			{rlReq("parity", 0, desc("files", "/files/b")), 2},
		}, 1},
	}
}

func TestEnvoyParity(t *testing.T) {
	envoy := buildEnvoy(t)
	rds := redistest.StartStandalone(t)
	dir := t.TempDir()
	b := &bench{cfg: &config{Redis: []string{rds.Addr()}, KeyPrefix: "parity"}, runID: "run"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep, err := b.startEnvoyConf(ctx, envoy, dir, parityConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ep.stop)
	confDir := filepath.Join(dir, "coordd-envoy")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "parity.yaml"), []byte(parityConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, _, _ := startCoordd(t, "COORDD_STORE=redis", "COORDD_REDIS_ADDRS="+rds.Addr(), "COORDD_REDIS_MODE=standalone",
		"COORDD_REDIS_KEY_PREFIX=parity-coordd", "COORDD_RATELIMIT_ENVOY_CONFIG="+confDir)
	clients := map[string]rlsv3.RateLimitServiceClient{}
	for name, a := range map[string]string{"envoy": ep.addr, "coordd": addr} {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		clients[name] = rlsv3.NewRateLimitServiceClient(conn)
	}

	for name, sc := range parityScenarios() {
		t.Run(name, func(t *testing.T) {
			// Start 100ms into a second, so that a scenario (a few ms)
			// runs within one second: the same windows and resets on both.
			for attempt := 0; ; attempt++ {
				now := time.Now()
				time.Sleep(now.Truncate(time.Second).Add(time.Second + 100*time.Millisecond).Sub(now))
				start := time.Now()
				diffs, over := runParity(t, clients, sc.steps)
				if over != sc.over {
					diffs = append(diffs, fmt.Sprintf("%d answers OVER_LIMIT overall by envoy ratelimit, want %d", over, sc.over))
				}
				crossed := time.Now().Unix() != start.Unix()
				switch {
				case len(diffs) == 0:
					return
				case !crossed:
					for _, d := range diffs {
						t.Error(d)
					}
					return
				case name != "fixed window of a second" || attempt == 2:
					// Its windows are still counting: it cannot run again.
					t.Fatalf("the run took from %v to %v, across a second's boundary, so the answers' "+
						"duration_until_reset may differ by a second; diffs: %q", start, time.Now(), diffs)
				}
				t.Logf("the run crossed a second's boundary; again in the next second, with new windows")
			}
		})
	}

	t.Run("client_cmd", func(t *testing.T) {
		client, err := goInstallEnvoy(ctx, buildDir, envoyRatelimitModule+"/src/client_cmd")
		if err != nil {
			t.Fatal(err)
		}
		run := func(descriptor string) string {
			out, err := exec.CommandContext(ctx, client, "-dial_string", addr, "-domain", "parity", "-descriptors", descriptor).CombinedOutput()
			if err != nil {
				t.Fatalf("client_cmd %s: %v\n%s", descriptor, err, out)
			}
			return string(out)
		}
		// Its response line is the proto's text: the first call is within
		// the limit (4 a minute), the fifth over it; all in one minute.
		if now := time.Now(); now.Second() >= 50 {
			time.Sleep(now.Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond).Sub(now))
		}
		if out := run("remote_address=192.0.2.1"); !strings.Contains(out, "overall_code:OK") || !strings.Contains(out, "limit_remaining:3") {
			t.Errorf("first call: %s", out)
		}
		for range 3 {
			run("remote_address=192.0.2.1")
		}
		if out := run("remote_address=192.0.2.1"); !strings.Contains(out, "overall_code:OVER_LIMIT") {
			t.Errorf("fifth call: %s", out)
		}
	})
}

// runParity sends each step's request n times to envoy ratelimit then to
// coordd, and returns how their answers differ and how many of envoy
// ratelimit's were OVER_LIMIT.
func runParity(t *testing.T, clients map[string]rlsv3.RateLimitServiceClient, steps []parityStep) (diffs []string, over int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, st := range steps {
		for n := range st.n {
			want, err := clients["envoy"].ShouldRateLimit(ctx, st.req)
			if err != nil {
				t.Fatalf("envoy ratelimit: step %d call %d: %v", i, n, err)
			}
			got, err := clients["coordd"].ShouldRateLimit(ctx, st.req)
			if err != nil {
				t.Fatalf("coordd: step %d call %d: %v", i, n, err)
			}
			if want.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
				over++
			}
			if !proto.Equal(got, want) {
				diffs = append(diffs, fmt.Sprintf("step %d call %d (%v): coordd differs from envoy ratelimit (-envoy +coordd):\n%s",
					i, n, st.req, cmp.Diff(want, got, protocmp.Transform())))
			}
		}
	}
	return diffs, over
}
