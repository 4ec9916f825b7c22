package envoyrl

// This file: the decisions of envoy.service.ratelimit.v3.RateLimitService/
// ShouldRateLimit, envoy ratelimit's own (src/service/ratelimit.go,
// src/limiter/base_limiter.go, src/redis/fixed_cache_impl.go at the
// version coordd pins), on store.Limits.CountHits: each descriptor's limit
// is looked up (Config.Limit); unlimited ones, and those another limit of
// the request replaces, are not counted; the others' hits are added to
// their fixed window's counter whatever its count (an over-limit request's
// hits count, as in envoy ratelimit; coordd's Allow keeps its own rule),
// all in one CountHits; a count after above the limit is OVER_LIMIT, or OK
// in shadow mode; the overall code is OVER_LIMIT if any descriptor's is.
// A limit with coordd's `algorithm:` is decided by store.Limits.Allow with
// that algorithm instead (a denial consumes nothing there).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// maxHits is where a request's hits_addend is capped: above any
// requests_per_unit (a uint32), so that every decision is what the full
// number would give, while counts stay small.
const maxHits = 1 << 32

// maxKeyBytes is the longest counter key stored as it is; a longer one (a
// descriptor's values come from the requests Envoy sees, which end users
// choose) is stored as its SHA-256, so that neither a key nor the store
// grows with a value's length.
const maxKeyBytes = 256

// Service decides ShouldRateLimit calls under the configuration in force.
type Service struct {
	st    store.Limits
	check func(field string, l store.Limit) error
	cfg   atomic.Pointer[Config]
}

// NewService returns a Service without configuration (every call
// FAILED_PRECONDITION, see ErrNoConfig) on st. check validates the limit
// of a descriptor with coordd's algorithm: (limiter.Config.CheckLimit).
func NewService(st store.Limits, check func(field string, l store.Limit) error) *Service {
	return &Service{st: st, check: check}
}

// ErrNoConfig answers a call while no configuration is loaded
// (ratelimit.envoy_config unset).
var ErrNoConfig = fmt.Errorf("no envoy rate limit configuration is loaded: set ratelimit.envoy_config to a directory of envoy ratelimit's YAML files")

// SetConfig puts c in force, after Check; on error nothing changes. nil:
// none. Calls in progress finish with the configuration they started with.
func (s *Service) SetConfig(c *Config) error {
	if err := s.Check(c); err != nil {
		return err
	}
	s.cfg.Store(c)
	return nil
}

// Check checks every limit of c with an algorithm: against coordd's
// bounds (a rate the store cannot represent exactly, a sliding log above
// ratelimit.max_log_limit, a period above ratelimit.max_period).
func (s *Service) Check(c *Config) error {
	if c == nil {
		return nil
	}
	for _, l := range c.Limits() {
		if l.Algorithm == "" {
			continue
		}
		if _, err := storeLimit(l, s.check); err != nil {
			return err
		}
	}
	return nil
}

// Config returns the configuration in force, or nil.
func (s *Service) Config() *Config { return s.cfg.Load() }

// storeLimit is l as a coordd limit (l.Algorithm set), checked by check.
func storeLimit(l *Limit, check func(string, store.Limit) error) (store.Limit, error) {
	alg, err := limiter.ParseAlgorithm(l.Algorithm)
	if err != nil {
		return store.Limit{}, fmt.Errorf("%s: algorithm: %w", l.FullKey, err)
	}
	sl := store.Limit{Algorithm: alg, Limit: int64(l.RequestsPerUnit), Period: l.Period}
	if check != nil {
		if err := check(l.FullKey, sl); err != nil {
			return store.Limit{}, err
		}
	}
	return sl, nil
}

// Result is what happened to one descriptor, for metrics.
type Result struct {
	StatKey string // the limit's (domain and keys, never values); "" without a limit
	Outcome string // ok, over_limit, shadow_over_limit, quota_over_limit, unlimited, replaced or no_limit
}

// ShouldRateLimit decides req for namespace ns: every descriptor's status
// and the overall code, and each descriptor's Result (nil on error). Bad
// input is a validate error naming the field.
func (s *Service) ShouldRateLimit(ctx context.Context, ns string, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, []Result, error) {
	descs := req.GetDescriptors()
	switch {
	case req.GetDomain() == "":
		return nil, nil, validate.Errorf("domain", "is required")
	case len(descs) == 0:
		return nil, nil, validate.Errorf("descriptors", "must not be empty")
	}
	cfg := s.cfg.Load()
	if cfg == nil {
		return nil, nil, ErrNoConfig
	}
	// Hits: envoy ratelimit's GetHitsAddends. is_negative_hits is ignored,
	// as it ignores it: the hits are added.
	hits := make([]int64, len(descs))
	for i, d := range descs {
		hits[i] = max(1, int64(req.GetHitsAddend()))
		if h := d.GetHitsAddend(); h != nil {
			hits[i] = int64(min(h.GetValue(), maxHits)) // 0: check only, add nothing
		}
	}
	// The limits to check: envoy ratelimit's constructLimitsToCheck.
	limits := make([]*Limit, len(descs))
	results := make([]Result, len(descs))
	replacing := map[string]bool{}
	for i, d := range descs {
		l := cfg.Limit(req.GetDomain(), d)
		if l != nil && l.Override && l.Period == 0 {
			// envoy ratelimit's server panics on it (its UnitToDivider).
			return nil, nil, validate.Errorf(fmt.Sprintf("descriptors[%d].limit.unit", i), "is %v; want SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR", d.GetLimit().GetUnit())
		}
		if l == nil {
			results[i].Outcome = "no_limit"
			continue
		}
		results[i].StatKey = l.StatKey
		for _, r := range l.Replaces {
			replacing[r] = true
		}
		if l.Unlimited {
			results[i].Outcome = "unlimited"
			continue
		}
		limits[i] = l
	}
	for i, l := range limits {
		if l != nil && l.Name != "" && replacing[l.Name] {
			limits[i], results[i].Outcome = nil, "replaced"
		}
	}
	// Count: the fixed windows in CountHits (of at most store.MaxHits
	// each), the algorithms apart.
	var counted []store.Hit
	var at []int
	statuses := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs))
	for i, l := range limits {
		if l == nil {
			continue
		}
		key := storeKey(ns, CounterKey(req.GetDomain(), descs[i], l))
		if l.Algorithm != "" {
			st, err := s.allow(ctx, key, l, hits[i])
			if err != nil {
				return nil, nil, err
			}
			statuses[i] = st
			continue
		}
		counted = append(counted, store.Hit{Key: key, Period: l.Period, Hits: hits[i]})
		at = append(at, i)
	}
	for len(counted) > 0 {
		n := min(len(counted), store.MaxHits)
		counts, err := s.st.CountHits(ctx, counted[:n])
		if err != nil {
			return nil, nil, err
		}
		for j, i := range at[:n] {
			statuses[i] = windowStatus(limits[i], counts[j].Count, counts[j].Now)
		}
		counted, at = counted[n:], at[n:]
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: statuses}
	for i, st := range statuses {
		switch {
		case st != nil:
			// set below
		case results[i].Outcome == "unlimited":
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			continue
		default: // no limit, or replaced
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			continue
		}
		results[i].Outcome = "ok"
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			switch {
			case limits[i].ShadowMode:
				st.Code, results[i].Outcome = rlsv3.RateLimitResponse_OK, "shadow_over_limit"
			case limits[i].QuotaMode:
				// envoy ratelimit answers OK with the limit and what is
				// left, and no time until the reset.
				st.Code, st.DurationUntilReset, results[i].Outcome = rlsv3.RateLimitResponse_OK, nil, "quota_over_limit"
			default:
				resp.OverallCode, results[i].Outcome = rlsv3.RateLimitResponse_OVER_LIMIT, "over_limit"
			}
		}
	}
	return resp, results, nil
}

// storeKey is the store's key of a counter key in namespace ns.
func storeKey(ns, counterKey string) string {
	if len(counterKey) > maxKeyBytes {
		sum := sha256.Sum256([]byte(counterKey))
		counterKey = "sha256:" + hex.EncodeToString(sum[:])
	}
	return store.Scope(ns, counterKey)
}

// windowStatus is envoy ratelimit's status of a fixed window whose count
// after the call is count, at the store's time now: over the limit if the
// count is above it, the remaining units, and the time until the window
// ends in whole seconds (its CalculateReset).
func windowStatus(l *Limit, count int64, now time.Time) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: l.current()}
	if limit := int64(l.RequestsPerUnit); count > limit {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	} else {
		st.LimitRemaining = uint32(limit - count)
	}
	sec := int64(l.Period / time.Second)
	st.DurationUntilReset = &durationpb.Duration{Seconds: sec - now.Unix()%sec}
	return st
}

// current is the limit as a status reports it.
func (l *Limit) current() *rlsv3.RateLimitResponse_RateLimit {
	return &rlsv3.RateLimitResponse_RateLimit{Name: l.Name, RequestsPerUnit: l.RequestsPerUnit, Unit: l.Unit}
}

// allow decides hits on key under l's algorithm: store.Limits.Allow of
// cost hits (a denial consumes nothing). 0 hits checks only: a peek of one
// unit, answered OK (as a fixed window at its limit is) with what is left.
// Hits above the limit's capacity can never pass: OVER_LIMIT without
// asking the store. duration_until_reset is the denial's retry_after, or,
// allowed, how long until the limiter is full again.
func (s *Service) allow(ctx context.Context, key string, l *Limit, hits int64) (*rlsv3.RateLimitResponse_DescriptorStatus, error) {
	sl, err := storeLimit(l, nil) // checked by SetConfig
	if err != nil {
		return nil, err
	}
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: l.current()}
	if hits > sl.Capacity() {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		st.DurationUntilReset = durationpb.New(sl.Period)
		return st, nil
	}
	d, err := s.st.Allow(ctx, key, sl, max(hits, 1), hits == 0)
	if err != nil {
		return nil, err
	}
	st.LimitRemaining = uint32(min(d.Remaining, math.MaxUint32))
	st.DurationUntilReset = durationpb.New(d.ResetAfter)
	if !d.Allowed && hits > 0 {
		st.Code, st.DurationUntilReset = rlsv3.RateLimitResponse_OVER_LIMIT, durationpb.New(d.RetryAfter)
	}
	return st, nil
}
