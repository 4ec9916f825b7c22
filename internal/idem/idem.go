// Package idem implements IdempotencyService's rules on top of
// store.Idempotency: defaults and bounds, owner tokens, and waiting for an
// in-progress key without polling.
package idem

import (
	"context"
	"errors"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

// Config holds the idempotency rules.
type Config struct {
	DefaultProcessingTTL time.Duration `mapstructure:"default_processing_ttl"`
	MaxProcessingTTL     time.Duration `mapstructure:"max_processing_ttl"`
	// DefaultResultTTL is also how long an abandoned key (its owner's lease
	// ran out) is remembered for fingerprint checks.
	DefaultResultTTL    time.Duration `mapstructure:"default_result_ttl"`
	MaxResultTTL        time.Duration `mapstructure:"max_result_ttl"`
	MaxResultBytes      int           `mapstructure:"max_result_bytes"`
	MaxFingerprintBytes int           `mapstructure:"max_fingerprint_bytes"`
	MaxFailureBytes     int           `mapstructure:"max_failure_bytes"`
	MaxWait             time.Duration `mapstructure:"-"`
	MaxNameBytes        int           `mapstructure:"-"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		DefaultProcessingTTL: 30 * time.Second,
		MaxProcessingTTL:     time.Hour,
		DefaultResultTTL:     24 * time.Hour,
		MaxResultTTL:         168 * time.Hour,
		MaxResultBytes:       1 << 20,
		MaxFingerprintBytes:  256,
		MaxFailureBytes:      4096,
		MaxWait:              time.Minute,
		MaxNameBytes:         256,
	}
}

// Service runs idempotency keys.
type Service struct {
	st    store.Idempotency
	sub   store.Subscriber
	cfg   Config
	drain waiter.Drain
}

// New returns a Service. Waits end early when drain is closed.
func New(st store.Idempotency, sub store.Subscriber, cfg Config, drain waiter.Drain) *Service {
	return &Service{st: st, sub: sub, cfg: cfg, drain: drain}
}

// BeginRequest claims or inspects a key. Durations of 0 are unset.
type BeginRequest struct {
	NS, Key, Fingerprint string
	ProcessingTTL, Wait  time.Duration
}

// Begin claims r.Key or reports its state, waiting up to r.Wait for an
// in-progress key to finish or be abandoned.
func (s *Service) Begin(ctx context.Context, r BeginRequest) (store.IdemState, error) {
	if err := validate.Name("key", r.Key, s.cfg.MaxNameBytes); err != nil {
		return store.IdemState{}, err
	}
	if err := validate.Name("fingerprint", r.Fingerprint, s.cfg.MaxFingerprintBytes); err != nil {
		return store.IdemState{}, err
	}
	if r.ProcessingTTL == 0 {
		r.ProcessingTTL = s.cfg.DefaultProcessingTTL
	}
	if err := validate.Duration("processing_ttl", r.ProcessingTTL, s.cfg.MaxProcessingTTL); err != nil {
		return store.IdemState{}, err
	}
	if err := validate.Wait("wait", r.Wait, s.cfg.MaxWait); err != nil {
		return store.IdemState{}, err
	}
	key := store.Scope(r.NS, r.Key)
	req := store.BeginIdempotent{
		Key: key, Fingerprint: r.Fingerprint, OwnerToken: token.New(),
		ProcessingTTL: r.ProcessingTTL, Retention: s.cfg.DefaultResultTTL,
	}
	var st store.IdemState
	err := waiter.Wait(ctx, s.sub, store.IdemTopic(key), r.Wait, s.drain, func(ctx context.Context) (bool, time.Duration, error) {
		var err error
		st, err = s.st.BeginIdempotent(ctx, req)
		if err != nil {
			return false, 0, err
		}
		// An in-progress key changes by itself when its owner's lease ends.
		return st.Outcome != store.InProgress, st.TTL, nil
	})
	if err != nil && !errors.Is(err, store.ErrFingerprintMismatch) {
		// The store may have made this caller the owner before failing to
		// say so; nobody else knows the token, so release the key now rather
		// than leave it in progress for processing_ttl.
		s.cleanUp(key, req.OwnerToken)
	}
	return st, err
}

// cleanUp clears, best effort, a key that a failed BeginIdempotent may have
// claimed for owner, as a retryable failure would.
func (s *Service) cleanUp(key, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.st.FinishIdempotent(ctx, store.FinishIdempotent{
		Key: key, OwnerToken: owner, Failure: &store.Failure{Retryable: true},
	})
}

// FinishRequest stores an outcome: Result, or Failure if not nil.
type FinishRequest struct {
	NS, Key, OwnerToken string
	Result              []byte
	Failure             *store.Failure
	ResultTTL           time.Duration // 0: the default
}

// Finish stores the outcome of the work begun with r.OwnerToken.
func (s *Service) Finish(ctx context.Context, r FinishRequest) error {
	if err := s.checkOwner(r.Key, r.OwnerToken); err != nil {
		return err
	}
	if r.Failure != nil {
		if len(r.Result) > 0 {
			return validate.Errorf("failure", "and result are both set; set one")
		}
		if err := validate.Text("failure.message", r.Failure.Message, s.cfg.MaxFailureBytes); err != nil {
			return err
		}
	}
	if err := validate.Bytes("result", r.Result, s.cfg.MaxResultBytes); err != nil {
		return err
	}
	if r.ResultTTL == 0 {
		r.ResultTTL = s.cfg.DefaultResultTTL
	}
	if err := validate.Duration("result_ttl", r.ResultTTL, s.cfg.MaxResultTTL); err != nil {
		return err
	}
	return s.st.FinishIdempotent(ctx, store.FinishIdempotent{
		Key: store.Scope(r.NS, r.Key), OwnerToken: r.OwnerToken,
		Result: r.Result, Failure: r.Failure, ResultTTL: r.ResultTTL,
	})
}

// Extend sets the owner's processing lease to ttl from now.
func (s *Service) Extend(ctx context.Context, ns, key, owner string, ttl time.Duration) (time.Time, error) {
	if err := s.checkOwner(key, owner); err != nil {
		return time.Time{}, err
	}
	if err := validate.Duration("processing_ttl", ttl, s.cfg.MaxProcessingTTL); err != nil {
		return time.Time{}, err
	}
	return s.st.ExtendIdempotent(ctx, store.Scope(ns, key), owner, ttl)
}

func (s *Service) checkOwner(key, owner string) error {
	if err := validate.Name("key", key, s.cfg.MaxNameBytes); err != nil {
		return err
	}
	return validate.Token("owner_token", owner)
}
