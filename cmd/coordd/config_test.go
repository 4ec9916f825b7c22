package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"

	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
)

// writeConfig writes a YAML configuration file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coordd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v, want nil", err)
	}
	for _, c := range []struct{ key, got, want string }{
		{"grpc_addr", cfg.GRPCAddr, "127.0.0.1:7070"},
		{"http_addr", cfg.HTTPAddr, "127.0.0.1:7071"},
		{"store", cfg.Store, "memory"},
		{"log_level", cfg.LogLevel, "info"},
		{"log_format", cfg.LogFormat, "text"},
	} {
		if c.got != c.want {
			t.Errorf("default %s = %q, want %q", c.key, c.got, c.want)
		}
	}
	if cfg.ShutdownTimeout <= 0 {
		t.Errorf("default shutdown_timeout = %v, want > 0", cfg.ShutdownTimeout)
	}
}

// With no file, no environment and no flags, loadConfig gives the defaults.
func TestLoadConfigNoSources(t *testing.T) {
	cfg, err := loadConfig(nil)
	if err != nil {
		t.Fatalf("loadConfig(nil) = %v", err)
	}
	want := DefaultConfig()
	want.applyLimits()
	if cfg.GRPCAddr != want.GRPCAddr || cfg.HTTPAddr != want.HTTPAddr || cfg.Store != want.Store {
		t.Errorf("loadConfig(nil) addrs/store = %q %q %q, want %q %q %q",
			cfg.GRPCAddr, cfg.HTTPAddr, cfg.Store, want.GRPCAddr, want.HTTPAddr, want.Store)
	}
	if cfg.Lock != want.Lock || cfg.Session != want.Session || !reflect.DeepEqual(cfg.Queue, want.Queue) ||
		cfg.Idempotency != want.Idempotency || cfg.RateLimit.Config != want.RateLimit.Config ||
		cfg.Limits != want.Limits || cfg.Memory != want.Memory || cfg.ShutdownTimeout != want.ShutdownTimeout {
		t.Errorf("loadConfig(nil) = %+v\nwant %+v", cfg, want)
	}
	if len(cfg.RateLimit.Policies) != 0 {
		t.Errorf("loadConfig(nil) policies = %v, want none", cfg.RateLimit.Policies)
	}
}

// A YAML file sets nested keys, including a policy map with durations; keys
// it does not name keep their defaults.
func TestLoadConfigFileNestedKeys(t *testing.T) {
	path := writeConfig(t, `
grpc_addr: 127.0.0.1:9001
log_format: json
limits:
  max_wait: 45s
queue:
  max_payload_bytes: 1024
  max_delay: 1h
lock:
  max_ttl: 2h
ratelimit:
  max_period: 48h
  policies:
    - name: api
      algorithm: token_bucket
      limit: 10
      period: 1s
      burst: 5
      shadow: true
      fail_open: true
    - name: login
      algorithm: sliding_log
      limit: 5
      period: 1m
    - name: hot
      algorithm: fixed_window
      limit: 1000
      period: 1s
      local_quota: 50
    - name: tiered
      limits:
        - name: per-second
          algorithm: token_bucket
          limit: 10
          period: 1s
        - name: per-day
          algorithm: fixed_window
          limit: 1000
          period: 24h
`)
	cfg, err := loadConfig([]string{"--config", path})
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	def := DefaultConfig()
	if cfg.GRPCAddr != "127.0.0.1:9001" {
		t.Errorf("grpc_addr = %q, want 127.0.0.1:9001", cfg.GRPCAddr)
	}
	if cfg.HTTPAddr != def.HTTPAddr {
		t.Errorf("http_addr = %q, want the default %q", cfg.HTTPAddr, def.HTTPAddr)
	}
	if cfg.LogFormat != "json" {
		t.Errorf("log_format = %q, want json", cfg.LogFormat)
	}
	if cfg.Queue.MaxPayloadBytes != 1024 {
		t.Errorf("queue.max_payload_bytes = %d, want 1024", cfg.Queue.MaxPayloadBytes)
	}
	if cfg.Queue.MaxDelay != time.Hour {
		t.Errorf("queue.max_delay = %v, want 1h", cfg.Queue.MaxDelay)
	}
	if cfg.Queue.DefaultVisibility != def.Queue.DefaultVisibility {
		t.Errorf("queue.default_visibility_timeout = %v, want the default %v", cfg.Queue.DefaultVisibility, def.Queue.DefaultVisibility)
	}
	if cfg.Lock.MaxTTL != 2*time.Hour {
		t.Errorf("lock.max_ttl = %v, want 2h", cfg.Lock.MaxTTL)
	}
	if cfg.Lock.DefaultTTL != def.Lock.DefaultTTL {
		t.Errorf("lock.default_ttl = %v, want the default %v", cfg.Lock.DefaultTTL, def.Lock.DefaultTTL)
	}
	if cfg.RateLimit.MaxPeriod != 48*time.Hour {
		t.Errorf("ratelimit.max_period = %v, want 48h", cfg.RateLimit.MaxPeriod)
	}
	// limits.max_wait is copied into every section that waits.
	for name, got := range map[string]time.Duration{
		"lock": cfg.Lock.MaxWait, "idempotency": cfg.Idempotency.MaxWait, "queue": cfg.Queue.MaxWait,
		"ratelimit": cfg.RateLimit.MaxWait,
	} {
		if got != 45*time.Second {
			t.Errorf("%s max wait = %v, want limits.max_wait 45s", name, got)
		}
	}

	wantPolicies := []PolicyConfig{
		{Name: "api", Algorithm: "token_bucket", Limit: 10, Period: time.Second, Burst: 5, Shadow: true, FailOpen: true},
		{Name: "login", Algorithm: "sliding_log", Limit: 5, Period: time.Minute},
		{Name: "hot", Algorithm: "fixed_window", Limit: 1000, Period: time.Second, LocalQuota: 50},
		{Name: "tiered", Limits: []LimitConfig{
			{Name: "per-second", Algorithm: "token_bucket", Limit: 10, Period: time.Second},
			{Name: "per-day", Algorithm: "fixed_window", Limit: 1000, Period: 24 * time.Hour},
		}},
	}
	if !reflect.DeepEqual(cfg.RateLimit.Policies, wantPolicies) {
		t.Errorf("policies = %+v, want %+v", cfg.RateLimit.Policies, wantPolicies)
	}
	ps, err := cfg.policies()
	if err != nil {
		t.Fatalf("policies(): %v", err)
	}
	if p := ps["api"]; p.Limit.Algorithm != store.TokenBucket || p.Limit.Limit != 10 || p.Limit.Period != time.Second ||
		p.Limit.Burst != 5 || !p.Shadow || p.OnStoreFailure != limiter.FailOpen {
		t.Errorf("limiter policy api = %+v", p)
	}
	if p := ps["login"]; p.Limit.Algorithm != store.SlidingLog || p.Shadow || p.OnStoreFailure != 0 {
		t.Errorf("limiter policy login = %+v", p)
	}
	if p := ps["hot"]; p.LocalQuota != 50 {
		t.Errorf("limiter policy hot = %+v, want local quota 50", p)
	}
	wantTiered := []limiter.NamedLimit{
		{Name: "per-second", Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: time.Second}},
		{Name: "per-day", Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 1000, Period: 24 * time.Hour}},
	}
	if p := ps["tiered"]; !slices.Equal(p.Limits, wantTiered) || p.Limit != (store.Limit{}) {
		t.Errorf("limiter policy tiered = %+v, want limits %+v", p, wantTiered)
	}
}

// on_store_failure names what a policy does while the store is
// unreachable; fail_open: true is a synonym of fail_open, and agrees with
// it; unset fails closed. ratelimit.expected_instances (default 1) and
// ratelimit.max_policies_per_namespace (default 1000) are read.
func TestLoadConfigOnStoreFailure(t *testing.T) {
	cfg, err := loadConfig(configArgs(t, map[string]string{"COORDD_RATELIMIT_EXPECTED_INSTANCES": "3"}, `
ratelimit:
  max_policies_per_namespace: 50
  policies:
    - {name: closed, algorithm: fixed_window, limit: 5, period: 1s, on_store_failure: fail_closed}
    - {name: open, algorithm: fixed_window, limit: 5, period: 1s, on_store_failure: fail_open}
    - {name: local, algorithm: token_bucket, limit: 10, period: 1s, on_store_failure: local}
    - {name: synonym, algorithm: fixed_window, limit: 5, period: 1s, fail_open: true}
    - {name: both, algorithm: fixed_window, limit: 5, period: 1s, fail_open: true, on_store_failure: fail_open}
    - {name: unset, algorithm: fixed_window, limit: 5, period: 1s}
`, nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RateLimit.ExpectedInstances != 3 || cfg.RateLimit.MaxPoliciesPerNamespace != 50 {
		t.Errorf("expected_instances, max_policies_per_namespace = %d, %d; want 3, 50", cfg.RateLimit.ExpectedInstances, cfg.RateLimit.MaxPoliciesPerNamespace)
	}
	ps, err := cfg.policies()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]limiter.OnStoreFailure{
		"closed": limiter.FailClosed, "open": limiter.FailOpen, "local": limiter.FailLocal,
		"synonym": limiter.FailOpen, "both": limiter.FailOpen, "unset": 0,
	} {
		if got := ps[name].OnStoreFailure; got != want {
			t.Errorf("policy %s: on_store_failure %v, want %v", name, got, want)
		}
	}
	def := DefaultConfig()
	if def.RateLimit.ExpectedInstances != 1 || def.RateLimit.MaxPoliciesPerNamespace != 100 {
		t.Errorf("defaults expected_instances, max_policies_per_namespace = %d, %d; want 1, 100", def.RateLimit.ExpectedInstances, def.RateLimit.MaxPoliciesPerNamespace)
	}
}

// Each source overrides the one before: defaults → file → COORDD_* → flags.
func TestLoadConfigPrecedence(t *testing.T) {
	file := writeConfig(t, `
grpc_addr: 127.0.0.1:9001
http_addr: 127.0.0.1:9101
log_level: warn
queue:
  max_delay: 1h
`)
	type want struct {
		grpcAddr, httpAddr, logLevel string
		maxDelay                     time.Duration
	}
	def := DefaultConfig()
	tests := []struct {
		name  string
		file  bool
		env   map[string]string
		flags []string
		want  want
	}{
		{
			name: "defaults",
			want: want{def.GRPCAddr, def.HTTPAddr, def.LogLevel, def.Queue.MaxDelay},
		},
		{
			name: "file",
			file: true,
			want: want{"127.0.0.1:9001", "127.0.0.1:9101", "warn", time.Hour},
		},
		{
			name: "env without file",
			env:  map[string]string{"COORDD_GRPC_ADDR": "127.0.0.1:9002", "COORDD_QUEUE_MAX_DELAY": "30m"},
			want: want{"127.0.0.1:9002", def.HTTPAddr, def.LogLevel, 30 * time.Minute},
		},
		{
			name: "env over file",
			file: true,
			env:  map[string]string{"COORDD_GRPC_ADDR": "127.0.0.1:9002", "COORDD_QUEUE_MAX_DELAY": "30m"},
			want: want{"127.0.0.1:9002", "127.0.0.1:9101", "warn", 30 * time.Minute},
		},
		{
			name:  "flags over env over file",
			file:  true,
			env:   map[string]string{"COORDD_GRPC_ADDR": "127.0.0.1:9002", "COORDD_QUEUE_MAX_DELAY": "30m", "COORDD_LOG_LEVEL": "error"},
			flags: []string{"--grpc-addr", "127.0.0.1:9003", "--log-level=debug"},
			want:  want{"127.0.0.1:9003", "127.0.0.1:9101", "debug", 30 * time.Minute},
		},
		{
			name:  "flags over file",
			file:  true,
			flags: []string{"--http-addr", "127.0.0.1:9103"},
			want:  want{"127.0.0.1:9001", "127.0.0.1:9103", "warn", time.Hour},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var args []string
			if tt.file {
				args = append(args, "--config", file)
			}
			args = append(args, tt.flags...)
			cfg, err := loadConfig(args)
			if err != nil {
				t.Fatalf("loadConfig(%q) = %v", args, err)
			}
			got := want{cfg.GRPCAddr, cfg.HTTPAddr, cfg.LogLevel, cfg.Queue.MaxDelay}
			if got != tt.want {
				t.Errorf("loadConfig(%q) = %+v, want %+v", args, got, tt.want)
			}
		})
	}
}

// Keys the configuration does not have are errors, wherever they are.
func TestLoadConfigUnknownKey(t *testing.T) {
	tests := []struct {
		name, yaml, key string
	}{
		{"top level", "grpc_adress: 127.0.0.1:1\n", "grpc_adress"},
		{"nested", "queue:\n  max_payload: 10\n", "max_payload"},
		{"in a policy", "ratelimit:\n  policies:\n    - name: p\n      algorithm: fixed_window\n      limit: 1\n      period: 1s\n      limt: 3\n", "limt"},
		{"unknown section", "redis:\n  addr: 127.0.0.1:6379\n", "redis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.yaml)
			_, err := loadConfig([]string{"--config", path})
			if err == nil {
				t.Fatalf("loadConfig with unknown key %q = nil error", tt.key)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("loadConfig with unknown key %q = %v; the error does not name the key", tt.key, err)
			}
		})
	}
}

// Every bad value is an error that names its key, whichever source it came
// from.
func TestLoadConfigBadValues(t *testing.T) {
	policy := func(body string) string {
		return "ratelimit:\n  policies:\n    - name: p\n" + body
	}
	tests := []struct {
		name  string
		yaml  string
		env   map[string]string
		flags []string
		key   string
	}{
		{name: "negative duration", yaml: "lock:\n  max_ttl: -1s\n", key: "lock.max_ttl"},
		{name: "default_ttl > max_ttl", yaml: "lock:\n  default_ttl: 2h\n  max_ttl: 1h\n", key: "lock.default_ttl"},
		{name: "unbounded max_holds", yaml: "session:\n  max_holds: 0\n", key: "session.max_holds"},
		{name: "max_holds over 10000", yaml: "session:\n  max_holds: 10001\n", key: "session.max_holds"},
		{name: "deprecated max_locks_per_session over 10000", yaml: "lock:\n  max_locks_per_session: 10001\n", key: "lock.max_locks_per_session"},
		{name: "deprecated max_locks_per_session beside max_holds", yaml: "lock:\n  max_locks_per_session: 5\nsession:\n  max_holds: 6\n", key: "set only session.max_holds"},
		{name: "max_shared_holders 0", yaml: "lock:\n  max_shared_holders: 0\n", key: "lock.max_shared_holders"},
		{name: "max_shared_holders over 10000", yaml: "lock:\n  max_shared_holders: 10001\n", key: "lock.max_shared_holders"},
		{name: "semaphore default_ttl > max_ttl", yaml: "semaphore:\n  default_ttl: 2h\n  max_ttl: 1h\n", key: "semaphore.default_ttl"},
		{name: "semaphore zero hold_limit", yaml: "semaphore:\n  hold_limit: 0s\n", key: "semaphore.hold_limit"},
		{name: "semaphore max_limit 0", yaml: "semaphore:\n  max_limit: 0\n", key: "semaphore.max_limit"},
		{name: "semaphore max_limit over 10000", yaml: "semaphore:\n  max_limit: 10001\n", key: "semaphore.max_limit"},
		{name: "election max_value_bytes 0", yaml: "election:\n  max_value_bytes: 0\n", key: "election.max_value_bytes"},
		{name: "election max_value_bytes over 1MiB", env: map[string]string{"COORDD_ELECTION_MAX_VALUE_BYTES": "1048577"}, key: "election.max_value_bytes"},
		{name: "store bogus", yaml: "store: bogus\n", key: "store"},
		{name: "ui.allowed_hosts with a port", yaml: "ui:\n  allowed_hosts: [coordd.internal:7071]\n", key: "ui.allowed_hosts[0]"},
		{name: "ui.allowed_hosts wildcard", env: map[string]string{"COORDD_UI_ALLOWED_HOSTS": "ok.example,*.example"}, key: "ui.allowed_hosts[1]"},
		{name: "bad log_level", yaml: "log_level: loud\n", key: "log_level"},
		{name: "bad log_format", yaml: "log_format: xml\n", key: "log_format"},
		{name: "zero shutdown_timeout", yaml: "shutdown_timeout: 0s\n", key: "shutdown_timeout"},
		{name: "negative limits.max_wait", yaml: "limits:\n  max_wait: -1s\n", key: "limits.max_wait"},
		{name: "session min > default", yaml: "session:\n  min_ttl: 1m\n  default_ttl: 10s\n", key: "session.min_ttl"},
		{name: "queue default_max_attempts > limit", yaml: "queue:\n  default_max_attempts: 10\n  max_attempts_limit: 5\n", key: "queue.default_max_attempts"},
		{name: "zero queue.max_payload_bytes", yaml: "queue:\n  max_payload_bytes: 0\n", key: "queue.max_payload_bytes"},
		{name: "unparseable duration", yaml: "lock:\n  max_ttl: soon\n", key: "max_ttl"},
		{name: "not a number", yaml: "queue:\n  max_payload_bytes: lots\n", key: "max_payload_bytes"},
		{name: "policy unknown algorithm", yaml: policy("      algorithm: quadratic\n      limit: 1\n      period: 1s\n"), key: "ratelimit.policies.p.algorithm"},
		{name: "policy limit 0", yaml: policy("      algorithm: fixed_window\n      limit: 0\n      period: 1s\n"), key: "ratelimit.policies.p.limit"},
		{name: "policy without period", yaml: policy("      algorithm: fixed_window\n      limit: 5\n"), key: "ratelimit.policies.p.period"},
		{name: "policy burst on fixed window", yaml: policy("      algorithm: fixed_window\n      limit: 5\n      period: 1s\n      burst: 2\n"), key: "ratelimit.policies.p.burst"},
		{name: "policy without a name", yaml: "ratelimit:\n  policies:\n    - algorithm: fixed_window\n      limit: 1\n      period: 1s\n", key: "ratelimit.policies[0].name"},
		{name: "two policies with one name", yaml: policy("      algorithm: fixed_window\n      limit: 1\n      period: 1s\n    - name: p\n      algorithm: fixed_window\n      limit: 2\n      period: 1s\n"), key: "ratelimit.policies[1].name"},
		{name: "fractional limit", yaml: policy("      algorithm: fixed_window\n      limit: 2.5\n      period: 1s\n"), key: "limit"},
		{name: "policy period over max_period", yaml: policy("      algorithm: fixed_window\n      limit: 5\n      period: 1000h\n"), key: "ratelimit.policies.p.period"},
		{name: "policy with a limit and limits", yaml: policy("      algorithm: fixed_window\n      limit: 5\n      period: 1s\n      limits:\n        - name: a\n          algorithm: fixed_window\n          limit: 5\n          period: 1m\n"), key: "ratelimit.policies.p.limits"},
		{name: "policy limit without a name", yaml: policy("      limits:\n        - algorithm: fixed_window\n          limit: 5\n          period: 1m\n"), key: "ratelimit.policies.p.limits[0].name"},
		{name: "policy limit of an unknown algorithm", yaml: policy("      limits:\n        - name: a\n          algorithm: cubic\n          limit: 5\n          period: 1m\n"), key: "ratelimit.policies.p.limits[0].algorithm"},
		{name: "policy limit 0 of several", yaml: policy("      limits:\n        - name: a\n          algorithm: fixed_window\n          limit: 5\n          period: 1m\n        - name: b\n          algorithm: fixed_window\n          period: 1h\n"), key: "ratelimit.policies.p.limits[1].limit"},
		{name: "policy limits with one name", yaml: policy("      limits:\n        - name: a\n          algorithm: fixed_window\n          limit: 5\n          period: 1m\n        - name: a\n          algorithm: fixed_window\n          limit: 50\n          period: 1h\n"), key: "ratelimit.policies.p.limits[1].name"},
		{name: "policy local quota on a sliding log", yaml: policy("      algorithm: sliding_log\n      limit: 5\n      period: 1m\n      local_quota: 2\n"), key: "ratelimit.policies.p.local_quota"},
		{name: "policy limit twice", yaml: policy("      limits:\n        - name: a\n          algorithm: fixed_window\n          limit: 5\n          period: 1m\n        - name: b\n          algorithm: fixed_window\n          limit: 5\n          period: 1m\n"), key: "ratelimit.policies.p.limits[1]"},
		{name: "policy on_store_failure unknown", yaml: policy("      algorithm: fixed_window\n      limit: 5\n      period: 1s\n      on_store_failure: open\n"), key: "ratelimit.policies.p.on_store_failure"},
		{name: "policy on_store_failure in upper case", yaml: policy("      algorithm: fixed_window\n      limit: 5\n      period: 1s\n      on_store_failure: LOCAL\n"), key: "ratelimit.policies.p.on_store_failure"},
		{name: "policy fail_open beside on_store_failure local", yaml: policy("      algorithm: fixed_window\n      limit: 5\n      period: 1s\n      fail_open: true\n      on_store_failure: local\n"), key: "ratelimit.policies.p.on_store_failure"},
		{name: "policy fail_open beside on_store_failure fail_closed", yaml: policy("      algorithm: fixed_window\n      limit: 5\n      period: 1s\n      fail_open: true\n      on_store_failure: fail_closed\n"), key: "ratelimit.policies.p.on_store_failure"},
		{name: "expected_instances 0", yaml: "ratelimit:\n  expected_instances: 0\n", key: "ratelimit.expected_instances"},
		{name: "env expected_instances negative", env: map[string]string{"COORDD_RATELIMIT_EXPECTED_INSTANCES": "-2"}, key: "ratelimit.expected_instances"},
		{name: "max_policies_per_namespace 0", yaml: "ratelimit:\n  max_policies_per_namespace: 0\n", key: "ratelimit.max_policies_per_namespace"},
		{name: "env negative duration", env: map[string]string{"COORDD_QUEUE_MAX_DELAY": "-5m"}, key: "queue.max_delay"},
		{name: "env store bogus", env: map[string]string{"COORDD_STORE": "bogus"}, key: "store"},
		{name: "redis mode bogus", yaml: "store: redis\nredis:\n  mode: ring\n", key: "redis.mode"},
		{name: "redis sentinel without master", yaml: "store: redis\nredis:\n  mode: sentinel\n", key: "redis.master_name"},
		{name: "redis db on a cluster", yaml: "store: redis\nredis:\n  mode: cluster\n  db: 2\n", key: "redis.db"},
		{name: "redis prefix with a brace", yaml: "store: redis\nredis:\n  key_prefix: a{b\n", key: "redis.key_prefix"},
		{name: "redis timeout zero", yaml: "store: redis\nredis:\n  timeout: 0s\n", key: "redis.timeout"},
		{name: "redis no addrs", yaml: "store: redis\nredis:\n  addrs: []\n", key: "redis.addrs"},
		{name: "redis negative wait_replicas", env: map[string]string{"COORDD_STORE": "redis", "COORDD_REDIS_WAIT_REPLICAS": "-1"}, key: "redis.wait_replicas"},
		{name: "redis idle_name_ttl under a minute", yaml: "store: redis\nredis:\n  idle_name_ttl: 59s\n", key: "redis.idle_name_ttl"},
		{name: "redis memory_high_water zero", yaml: "store: redis\nredis:\n  memory_high_water: 0\n", key: "redis.memory_high_water"},
		{name: "redis memory_high_water above 1", env: map[string]string{"COORDD_STORE": "redis", "COORDD_REDIS_MEMORY_HIGH_WATER": "1.5"}, key: "redis.memory_high_water"},
		{name: "zero queue.max_messages", yaml: "queue:\n  max_messages: 0\n", key: "queue.max_messages"},
		{name: "negative queue.max_messages", env: map[string]string{"COORDD_QUEUE_MAX_MESSAGES": "-1"}, key: "queue.max_messages"},
		{name: "flag store bogus", flags: []string{"--store", "bogus"}, key: "store"},
		{name: "flag bad log level", flags: []string{"--log-level", "loud"}, key: "log_level"},
		{name: "flag empty grpc addr", flags: []string{"--grpc-addr", ""}, key: "grpc_addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(configArgs(t, tt.env, tt.yaml, tt.flags))
			if err == nil {
				t.Fatalf("loadConfig = nil error, want one naming %q", tt.key)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("loadConfig = %q; want an error naming %q", err, tt.key)
			}
		})
	}
}

// A value that cannot be decoded is an error in words, naming its key and
// where the value came from, never Go's parser's (strconv.ParseInt: ...);
// a number too large for its field is an error, never wrapped around.
func TestLoadConfigDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string            // from the file, when set
		env  map[string]string // from the environment
		want []string          // each in the error
	}{
		{name: "int from file", yaml: "queue:\n  max_payload_bytes: lots\n",
			want: []string{`queue.max_payload_bytes: "lots" is not a whole number; set in `}},
		{name: "int from env", env: map[string]string{"COORDD_LIMITS_MAX_NAME_BYTES": "x"},
			want: []string{`limits.max_name_bytes: "x" is not a whole number; set by COORDD_LIMITS_MAX_NAME_BYTES`}},
		{name: "int overflow from env", env: map[string]string{"COORDD_LIMITS_MAX_NAME_BYTES": "99999999999999999999"},
			want: []string{`limits.max_name_bytes: "99999999999999999999" is too large: at most 9223372036854775807; set by COORDD_LIMITS_MAX_NAME_BYTES`}},
		{name: "int underflow from env", env: map[string]string{"COORDD_QUEUE_MAX_PAYLOAD_BYTES": "-99999999999999999999"},
			want: []string{`queue.max_payload_bytes: "-99999999999999999999" is too small: at least -9223372036854775808; set by COORDD_QUEUE_MAX_PAYLOAD_BYTES`}},
		{name: "int overflow from file, above int64", yaml: "limits:\n  max_name_bytes: 10000000000000000000\n",
			want: []string{"limits.max_name_bytes: 10000000000000000000 is too large", "; set in "}},
		{name: "int overflow from file, as a float", yaml: "limits:\n  max_waiters_per_namespace: 1e30\n",
			want: []string{"limits.max_waiters_per_namespace: 1e+30 is too large", "; set in "}},
		{name: "int64 overflow in a list", yaml: "ratelimit:\n  policies:\n    - name: p\n      algorithm: fixed_window\n      limit: 9223372036854775808\n      period: 1s\n",
			want: []string{"ratelimit.policies[0].limit: 9223372036854775808 is too large", "; set in "}},
		{name: "fraction from file", yaml: "queue:\n  max_payload_bytes: 1.5\n",
			want: []string{"queue.max_payload_bytes: 1.5 is not a whole number; set in "}},
		{name: "duration without a unit from env", env: map[string]string{"COORDD_LIMITS_MAX_WAIT": "5"},
			want: []string{`limits.max_wait: "5" is not a duration: write it with a unit, such as 10s or 5m; set by COORDD_LIMITS_MAX_WAIT`}},
		{name: "duration from file", yaml: "lock:\n  max_ttl: soon\n",
			want: []string{`lock.max_ttl: "soon" is not a duration`, "; set in "}},
		{name: "duration overflow from env", env: map[string]string{"COORDD_QUEUE_MAX_DELAY": "9999999h"},
			want: []string{`queue.max_delay: "9999999h" is not a duration`, "at most 2562047h47m16.854775807s; set by COORDD_QUEUE_MAX_DELAY"}},
		{name: "bare number duration from file", yaml: "shutdown_timeout: 10\n",
			want: []string{"shutdown_timeout: 10 is not a duration: write it with a unit", "; set in "}},
		{name: "float from env", env: map[string]string{"COORDD_LIMITS_MAX_STREAM_MESSAGES_PER_SECOND": "fast"},
			want: []string{`limits.max_stream_messages_per_second: "fast" is not a number; set by COORDD_LIMITS_MAX_STREAM_MESSAGES_PER_SECOND`}},
		{name: "float NaN from env", env: map[string]string{"COORDD_LIMITS_MAX_STREAM_MESSAGES_PER_SECOND": "NaN"},
			want: []string{`limits.max_stream_messages_per_second: "NaN" is not a finite number; set by COORDD_`}},
		{name: "float overflow from env", env: map[string]string{"COORDD_LIMITS_MAX_STREAM_MESSAGES_PER_SECOND": "1e400"},
			want: []string{`limits.max_stream_messages_per_second: "1e400" is not a finite number; set by COORDD_`}},
		{name: "float from file", yaml: "limits:\n  max_stream_messages_per_second: [1]\n",
			want: []string{"limits.max_stream_messages_per_second: [1] is not a number; set in "}},
		{name: "bool from env", env: map[string]string{"COORDD_REDIS_ALLOW_EVICTION": "yes"},
			want: []string{`redis.allow_eviction: "yes" is not true or false; set by COORDD_REDIS_ALLOW_EVICTION`}},
		{name: "bool from file", yaml: "ratelimit:\n  policies:\n    - name: p\n      algorithm: fixed_window\n      limit: 1\n      period: 1s\n      shadow: 1\n",
			want: []string{"ratelimit.policies[0].shadow: 1 is not true or false; set in "}},
		{name: "list from file", yaml: "redis:\n  addrs: 5\n",
			want: []string{"redis.addrs: 5 is not a list; set in "}},
		{name: "list of tables from env", env: map[string]string{"COORDD_AUTH_API_KEYS": "k"},
			want: []string{"auth.api_keys: is a list of tables, which only the configuration file can set; set by COORDD_AUTH_API_KEYS"}},
		{name: "every bad value, each on its line", yaml: "queue:\n  max_payload_bytes: lots\n", env: map[string]string{"COORDD_LOCK_MAX_TTL": "x"},
			want: []string{"queue.max_payload_bytes: \"lots\" is not a whole number; set in ", "lock.max_ttl: \"x\" is not a duration", "\n"}},
		{name: "env overrides file", yaml: "lock:\n  max_ttl: 1h\n", env: map[string]string{"COORDD_LOCK_MAX_TTL": "x"},
			want: []string{`lock.max_ttl: "x" is not a duration`, "; set by COORDD_LOCK_MAX_TTL"}},
		{name: "a check's error names the variable too", env: map[string]string{"COORDD_QUEUE_MAX_DELAY": "-5m"},
			want: []string{"queue.max_delay: must be positive, got -5m0s; set by COORDD_QUEUE_MAX_DELAY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(configArgs(t, tt.env, tt.yaml, nil))
			if err == nil {
				t.Fatalf("loadConfig = nil error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("loadConfig = %q\nwant it to contain %q", err, w)
				}
			}
			for _, internal := range []string{"strconv", "time: ", "Parse", "'", "decoding failed"} {
				if strings.Contains(err.Error(), internal) {
					t.Errorf("loadConfig = %q: Go's internals (%q) in an operator's error", err, internal)
				}
			}
		})
	}
}

func TestLoadConfigFileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"--config", missing}, "nope.yaml"},
		{"invalid yaml", []string{"--config", writeConfig(t, "queue: [unclosed\n")}, "coordd.yaml"},
		{"unknown flag", []string{"--bogus"}, "bogus"},
		{"stray argument", []string{"serve"}, "serve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(tt.args)
			if err == nil {
				t.Fatalf("loadConfig(%q) = nil error", tt.args)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadConfig(%q) = %q; want it to mention %q", tt.args, err, tt.want)
			}
		})
	}
}

// Policy names are what clients send in AllowRequest.policy, which is
// case-sensitive, so the configuration must either keep a name's case or
// reject it; viper lowercases map keys, turning "Premium" into "premium"
// without a word, and Allow(policy "Premium") then fails.
func TestLoadConfigPolicyNameCase(t *testing.T) {
	path := writeConfig(t, "ratelimit:\n  policies:\n    - name: Premium\n      algorithm: fixed_window\n      limit: 10\n      period: 1s\n")
	cfg, err := loadConfig([]string{"--config", path})
	if err != nil {
		if !strings.Contains(err.Error(), "Premium") {
			t.Errorf("loadConfig = %v; an error for the policy name should name it", err)
		}
		return // rejecting the name is fine
	}
	ps, err := cfg.policies()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ps["Premium"]; !ok {
		t.Errorf("policy %q was loaded as %v: clients asking for policy %q will be told it is not configured", "Premium", ps, "Premium")
	}
}

// Values that YAML types differently from the field must not be coerced
// into something else without a word: a duration written as a bare number
// is nanoseconds (shutdown_timeout: 10 is 10ns, so shutdown kills every
// in-flight call at once), and a fractional count is truncated. Rejecting
// them passes; so does reading a bare number as seconds.
func TestLoadConfigRejectsSilentCoercion(t *testing.T) {
	tests := []struct {
		name, yaml, key string
		get             func(Config) any
		fine            any // an acceptable value when there is no error
	}{
		{"bare number shutdown_timeout", "shutdown_timeout: 10\n", "shutdown_timeout",
			func(c Config) any { return c.ShutdownTimeout }, 10 * time.Second},
		{"bare number queue.max_delay", "queue:\n  max_delay: 3600\n", "queue.max_delay",
			func(c Config) any { return c.Queue.MaxDelay }, time.Hour},
		{"bare number ratelimit.max_period", "ratelimit:\n  max_period: 60\n", "ratelimit.max_period",
			func(c Config) any { return c.RateLimit.MaxPeriod }, time.Minute},
		{"fractional queue.max_payload_bytes", "queue:\n  max_payload_bytes: 1.5\n", "max_payload_bytes",
			func(c Config) any { return c.Queue.MaxPayloadBytes }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig([]string{"--config", writeConfig(t, tt.yaml)})
			if err != nil {
				if !strings.Contains(err.Error(), tt.key) {
					t.Errorf("loadConfig(%q) = %q; want an error naming %s", tt.yaml, err, tt.key)
				}
				return
			}
			if got := tt.get(cfg); tt.fine == nil || got != tt.fine {
				t.Errorf("loadConfig(%q) set %s = %v without an error", tt.yaml, tt.key, got)
			}
		})
	}
}

// TestConfigurationDocumentsEveryKey keeps the configuration reference's
// table whole: every key the daemon reads appears there with its default.
func TestConfigurationDocumentsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	v := viper.New()
	setDefaults(v, "", reflect.ValueOf(DefaultConfig()))
	for _, key := range v.AllKeys() {
		if !strings.Contains(string(doc), "| `"+key+"` |") {
			t.Errorf("docs/configuration.md's table has no row for %s", key)
		}
	}
}

// TestExampleConfigsLoad loads the example configuration files the
// documentation points to.
func TestExampleConfigsLoad(t *testing.T) {
	cfg, err := loadConfig([]string{"--config", "../../deploy/coordd-redis-cluster.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != "redis" || cfg.Redis.Mode != "cluster" || len(cfg.Redis.Addrs) != 3 || cfg.Redis.WaitReplicas != 1 {
		t.Fatalf("loaded %+v", cfg.Redis)
	}
}

// TestRedisAddrsFromEnv: a list in the environment is comma-separated.
func TestRedisAddrsFromEnv(t *testing.T) {
	t.Setenv("COORDD_STORE", "redis")
	t.Setenv("COORDD_REDIS_ADDRS", "10.0.0.1:6379,10.0.0.2:6379")
	cfg, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Redis.Addrs, []string{"10.0.0.1:6379", "10.0.0.2:6379"}) {
		t.Fatalf("redis.addrs = %q", cfg.Redis.Addrs)
	}
}

// TestAPIKeysFile: keys can come from a file of their own (a mounted
// Secret), added to those of the configuration; a bad file is an error that
// names the key.
func TestAPIKeysFile(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, []byte("- namespace: team-a\n  key: a-secret-of-sixteen-plus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig([]string{"--config", writeConfig(t, "auth:\n  enabled: true\n  api_keys_file: "+keys+"\n  api_keys:\n    - namespace: team-b\n      key: another-secret-sixteen\n")})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := cfg.Auth.config()
	if err != nil || len(auth.APIKeys) != 2 || auth.APIKeys[1].Namespace != "team-a" {
		t.Fatalf("auth = %+v, %v; want the file's key after the configuration's", auth, err)
	}
	if err := os.WriteFile(keys, []byte("- namespace: team-a\n  secret: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig([]string{"--config", writeConfig(t, "auth:\n  api_keys_file: "+keys+"\n")}); err == nil || !strings.Contains(err.Error(), "auth.api_keys_file") {
		t.Fatalf("a file with an unknown field = %v, want an error naming auth.api_keys_file", err)
	}
}

// TestAPIKeysFileErrorsQuoteNoKey: an api_keys_file that does not parse
// is an error (logged by a failed reload) that names the file and a line,
// but no text of it: the text holds keys. The YAML decoder's own errors
// quote a value's first characters, an unknown field's name, an anchor.
func TestAPIKeysFileErrorsQuoteNoKey(t *testing.T) {
	const secret = "s3cr3t-key-material-0123456789"
	for _, c := range []struct{ file, line string }{
		{"- " + secret + "\n", "line 1"},                                   // a list of bare keys
		{"- namespace: team\n  " + secret + ": x\n", "line 2"},             // a key where a field name goes
		{"- namespace: team\n  key: [" + secret + "]\n", "line 2"},         // not a string
		{"- namespace: team\n  key: *" + secret + "\n", ""},                // an unknown anchor
		{"- namespace: team\n  key: \"" + secret + "\n", ""},               // unterminated: a syntax error
		{"- namespace: team\n  key: " + secret + "\n  key: x\n", "line 3"}, // twice
		{secret + ": {namespace: team}\n", "line 1"},                       // a mapping, not a list
		{"- !!binary " + secret + "\n", "line 1"},
	} {
		keys := filepath.Join(t.TempDir(), "keys.yaml")
		if err := os.WriteFile(keys, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := AuthSection{APIKeysFile: keys}.config()
		if err == nil {
			t.Errorf("%q: no error", c.file)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "auth.api_keys_file "+keys) || !strings.Contains(msg, c.line) {
			t.Errorf("%q: error %q does not name the file and %q", c.file, msg, c.line)
		}
		for n := 3; n <= len(secret); n++ { // "s3c", the shortest prefix worth a leak
			if strings.Contains(msg, secret[:n]) {
				t.Errorf("%q: error %q quotes the key's text", c.file, msg)
				break
			}
		}
	}
	// What parses still does, values as written.
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, []byte("- namespace: team\n  key: "+secret+"\n- {namespace: other, key_sha256: null}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := AuthSection{APIKeysFile: keys}.config()
	if err != nil || len(auth.APIKeys) != 2 || auth.APIKeys[0].Key != secret || auth.APIKeys[1].Namespace != "other" || auth.APIKeys[1].KeySHA256 != "" {
		t.Errorf("auth = %+v, %v", auth, err)
	}
	for _, empty := range []string{"", "[]\n", "# none yet\n"} {
		if err := os.WriteFile(keys, []byte(empty), 0o600); err != nil {
			t.Fatal(err)
		}
		if auth, err := (AuthSection{APIKeysFile: keys}).config(); err != nil || len(auth.APIKeys) != 0 {
			t.Errorf("%q: %+v, %v; want no keys", empty, auth, err)
		}
	}
}

// TestLoadConfigSharedLimitOnce: limits.max_wait and limits.max_name_bytes
// are copied into every section that uses them, and each section checks
// them; a bad one is still reported once.
func TestLoadConfigSharedLimitOnce(t *testing.T) {
	for _, yaml := range []string{"limits:\n  max_wait: -1s\n", "limits:\n  max_name_bytes: 0\n", "session:\n  max_holds: 0\n"} {
		_, err := loadConfig([]string{"--config", writeConfig(t, yaml)})
		if err == nil {
			t.Fatalf("loadConfig(%q) = nil error", yaml)
		}
		if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 {
			t.Errorf("loadConfig(%q) = %d errors, want 1:\n%v", yaml, len(lines), err)
		}
	}
}

// TestLoadConfigSharedLimitsReachEverySection: the shared limits (and the
// session's bound on holds of every kind) are copied into the semaphore and
// election sections, as into the lock's.
func TestLoadConfigSharedLimitsReachEverySection(t *testing.T) {
	cfg, err := loadConfig([]string{"--config", writeConfig(t, "limits:\n  max_wait: 5s\n  max_name_bytes: 64\nsession:\n  max_holds: 7\n")})
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Lock; c.MaxWait != 5*time.Second || c.MaxNameBytes != 64 || c.MaxSessionHolds != 7 {
		t.Errorf("lock section = %+v, want max wait 5s, 64 name bytes, 7 holds per session", c)
	}
	if c := cfg.Semaphore; c.MaxWait != 5*time.Second || c.MaxNameBytes != 64 || c.MaxSessionHolds != 7 {
		t.Errorf("semaphore section = %+v, want max wait 5s, 64 name bytes, 7 holds per session", c)
	}
	if c := cfg.Election; c.MaxWait != 5*time.Second || c.MaxNameBytes != 64 || c.MaxSessionHolds != 7 {
		t.Errorf("election section = %+v, want max wait 5s, 64 name bytes, 7 holds per session", c)
	}
}

// TestDeprecatedMaxLocksPerSession: lock.max_locks_per_session, the old
// name of session.max_holds, still sets it (from the file or the
// environment), with a warning for the daemon to log.
func TestDeprecatedMaxLocksPerSession(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  string
	}{
		{"file", []string{"--config", writeConfig(t, "lock:\n  max_locks_per_session: 7\n")}, ""},
		{"environment", nil, "7"},
		{"both names, one value", []string{"--config", writeConfig(t, "lock:\n  max_locks_per_session: 7\nsession:\n  max_holds: 7\n")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("COORDD_LOCK_MAX_LOCKS_PER_SESSION", c.env)
			}
			cfg, err := loadConfig(c.args)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Session.MaxHolds != 7 || cfg.Semaphore.MaxSessionHolds != 7 {
				t.Errorf("session.max_holds = %d (semaphore section %d), want 7", cfg.Session.MaxHolds, cfg.Semaphore.MaxSessionHolds)
			}
			if len(cfg.Deprecated) != 1 || !strings.Contains(cfg.Deprecated[0], "session.max_holds") {
				t.Errorf("Deprecated = %q, want one warning naming session.max_holds", cfg.Deprecated)
			}
		})
	}
	cfg, err := loadConfig(nil)
	if err != nil || len(cfg.Deprecated) != 0 {
		t.Errorf("defaults: Deprecated = %q, %v; want none", cfg.Deprecated, err)
	}
}

// TestUnknownEnv: a COORDD_* variable that names no key is reported (coordd
// logs it), one that does is not.
func TestUnknownEnv(t *testing.T) {
	got := unknownEnv([]string{"COORDD_QUEUE_MAX_DELAY=1s", "COORDD_QUEUE_MAX_DELAYY=1s", "COORDD_LOG_LEVEL=debug", "COORDD_LOGLEVEL=debug", "PATH=/bin", "COORDD_REDIS_ADDRS=x"})
	if want := []string{"COORDD_QUEUE_MAX_DELAYY", "COORDD_LOGLEVEL"}; !slices.Equal(got, want) {
		t.Fatalf("unknownEnv = %q, want %q", got, want)
	}
}

// TestRedisLogIsJSON: go-redis's lines, through redisLog, are JSON records
// of coordd's logger with log_format json, not plain text.
func TestRedisLogIsJSON(t *testing.T) {
	var buf bytes.Buffer
	cfg := DefaultConfig()
	cfg.LogFormat = "json"
	log, err := newLogger(cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	redisLog{log}.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not JSON: %q: %v", buf.String(), err)
	}
	if rec["level"] != "WARN" || rec["msg"] != "go-redis: redis: connection pool: failed to dial after 5 attempts" {
		t.Fatalf("record %v", rec)
	}
}

// configArgs sets env for the test and returns coordd's arguments for a
// configuration file of yamlText (none if "") and flags.
func configArgs(t *testing.T, env map[string]string, yamlText string, flags []string) []string {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var args []string
	if yamlText != "" {
		args = append(args, "--config", writeConfig(t, yamlText))
	}
	return append(args, flags...)
}
