package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
)

// TestConfigValidate: the services' Config checks every domain section and
// the policies, and NewServices refuses one that does not pass, so that a
// bad Config never runs.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*server.Config)
		want string // "": valid
	}{
		{"defaults", func(*server.Config) {}, ""},
		{"session", func(c *server.Config) { c.Session.MaxHolds = 0 }, "session.max_holds"},
		{"session", func(c *server.Config) { c.Session.MinTTL = 0 }, "session.min_ttl"},
		{"limiter", func(c *server.Config) { c.Limiter.MaxPeriod = 0 }, "ratelimit.max_period"},
		{"idempotency", func(c *server.Config) { c.Idem.MaxResultBytes = 0 }, "idempotency.max_result_bytes"},
		{"queue", func(c *server.Config) { c.Queue.DedupWindow = 0 }, "queue.dedup_window"},
		{"policy", func(c *server.Config) {
			c.Policies = map[string]limiter.Policy{"p": {Limit: store.Limit{Algorithm: store.FixedWindow, Period: time.Second}}}
		}, "ratelimit.policies.p.limit"},
		{"a shared limit once", func(c *server.Config) { c.Lock.MaxWait, c.Idem.MaxWait, c.Queue.MaxWait = -1, -1, -1 }, "limits.max_wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := server.DefaultConfig()
			tt.set(&cfg)
			err := cfg.Validate()
			st := memory.New(memory.Options{})
			defer st.Close()
			_, newErr := server.NewServices(st, clock.Real{}, cfg, context.Background())
			if tt.want == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate() = %v, NewServices = %v; want nil", err, newErr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.want)
			}
			if n := strings.Count(err.Error(), tt.want); n != 1 {
				t.Errorf("Validate() = %q names %s %d times, want once", err, tt.want, n)
			}
			if newErr == nil || newErr.Error() != err.Error() {
				t.Fatalf("NewServices = %v, want Validate's error", newErr)
			}
		})
	}
}

// TestLimitsValidate: every limit against abuse may be 0 (no limit) but not
// negative, and the error names its key.
func TestLimitsValidate(t *testing.T) {
	if err := (server.Limits{}).Validate(); err != nil {
		t.Fatalf("no limits: Validate() = %v", err)
	}
	tests := []struct {
		name string
		l    server.Limits
		want string
	}{
		{"waiters per namespace", server.Limits{MaxWaitersPerNamespace: -1}, "limits.max_waiters_per_namespace: must not be negative (0: no limit), got -1"},
		{"waiters per connection", server.Limits{MaxWaitersPerConnection: -1}, "limits.max_waiters_per_connection: must not be negative (0: no limit), got -1"},
		{"streams per namespace", server.Limits{MaxStreamsPerNamespace: -1}, "limits.max_streams_per_namespace: must not be negative (0: no limit), got -1"},
		{"streams per connection", server.Limits{MaxStreamsPerConnection: -1}, "limits.max_streams_per_connection: must not be negative (0: no limit), got -1"},
		{"stream message rate", server.Limits{MaxStreamMessageRate: -0.5}, "limits.max_stream_messages_per_second: must not be negative (0: no limit)"},
		{"max sessions", server.Limits{MaxSessions: -2}, "limits.max_sessions: must be -1 (no limit), 0 (derived from the memory coordd may use) or positive, got -2"},
		{"shed store latency", server.Limits{ShedStoreLatency: -time.Millisecond}, "limits.shed_store_latency: must not be negative (0: never shed), got -1ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.l.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestAuthConfigValidate: Validate makes Set's check, naming the key of the
// bad entry, and NewAuthenticator refuses what it refuses.
func TestAuthConfigValidate(t *testing.T) {
	const key = "a-key-of-sixteen-or-more"
	tests := []struct {
		name string
		cfg  server.AuthConfig
		want string // "": valid
	}{
		{"off", server.AuthConfig{}, ""},
		{"a key", server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{{Namespace: "a", Key: key}}}, ""},
		{"an identity", server.AuthConfig{Enabled: true, MTLS: []server.Identity{{Identity: "spiffe://x/y", Namespace: "a"}}}, ""},
		{"enabled with nothing", server.AuthConfig{Enabled: true}, "auth.enabled"},
		{"bad namespace", server.AuthConfig{APIKeys: []server.APIKey{{Namespace: "a b", Key: key}}}, "auth.api_keys[0].namespace"},
		{"key and digest", server.AuthConfig{APIKeys: []server.APIKey{{Namespace: "a", Key: key, KeySHA256: "00"}}}, "auth.api_keys[0]: set key or key_sha256"},
		{"short key", server.AuthConfig{APIKeys: []server.APIKey{{Namespace: "a", Key: "short"}}}, "auth.api_keys[0].key"},
		{"bad digest", server.AuthConfig{APIKeys: []server.APIKey{{Namespace: "a", KeySHA256: "zz"}}}, "auth.api_keys[0].key_sha256"},
		{"a key twice", server.AuthConfig{APIKeys: []server.APIKey{{Namespace: "a", Key: key}, {Namespace: "b", Key: key}}}, "auth.api_keys[1]: the same key"},
		{"no identity", server.AuthConfig{MTLS: []server.Identity{{Namespace: "a"}}}, "auth.mtls[0].identity"},
		{"identity's namespace", server.AuthConfig{MTLS: []server.Identity{{Identity: "x", Namespace: ""}}}, "auth.mtls[0].namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			_, newErr := server.NewAuthenticator(tt.cfg)
			if tt.want == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate() = %v, NewAuthenticator = %v; want nil", err, newErr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.want)
			}
			if newErr == nil || newErr.Error() != err.Error() {
				t.Fatalf("NewAuthenticator = %v, want Validate's error", newErr)
			}
		})
	}
}
