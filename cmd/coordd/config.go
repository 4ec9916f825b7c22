package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/coordd/coordd/internal/console"
	"github.com/coordd/coordd/internal/election"
	"github.com/coordd/coordd/internal/envoyrl"
	"github.com/coordd/coordd/internal/gateway"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/idem"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/semaphore"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// Config is the daemon's whole configuration. Keys are the mapstructure
// tags, nested with dots (queue.max_payload_bytes); docs/configuration.md
// documents every one with its default.
type Config struct {
	GRPCAddr        string        `mapstructure:"grpc_addr"`
	HTTPAddr        string        `mapstructure:"http_addr"`
	Store           string        `mapstructure:"store"`
	LogLevel        string        `mapstructure:"log_level"`
	LogFormat       string        `mapstructure:"log_format"`
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`

	Limits struct {
		MaxNameBytes         int           `mapstructure:"max_name_bytes"`
		MaxWait              time.Duration `mapstructure:"max_wait"`
		MaxMessageBytes      int           `mapstructure:"max_message_bytes"`
		MaxConcurrentStreams int           `mapstructure:"max_concurrent_streams"`
		server.Limits        `mapstructure:",squash"`
	} `mapstructure:"limits"`
	GRPC    GRPCConfig  `mapstructure:"grpc"`
	TLS     TLSConfig   `mapstructure:"tls"`
	Auth    AuthSection `mapstructure:"auth"`
	Metrics struct {
		Queues []metrics.QueueRef `mapstructure:"queues"`
	} `mapstructure:"metrics"`
	Memory struct {
		SweepInterval time.Duration `mapstructure:"sweep_interval"`
	} `mapstructure:"memory"`
	Redis     RedisConfig      `mapstructure:"redis"`
	Lock      lock.Config      `mapstructure:"lock"`
	Semaphore semaphore.Config `mapstructure:"semaphore"`
	Election  election.Config  `mapstructure:"election"`
	Session   session.Config   `mapstructure:"session"`
	// Deprecated lists what loadConfig read under a deprecated key, for
	// the daemon to warn about.
	Deprecated  []string       `mapstructure:"-"`
	RateLimit   RateLimit      `mapstructure:"ratelimit"`
	Idempotency idem.Config    `mapstructure:"idempotency"`
	Queue       queue.Config   `mapstructure:"queue"`
	UI          console.Config `mapstructure:"ui"`
	HTTPAPI     gateway.Config `mapstructure:"http_api"`
}

// GRPCConfig is the grpc section: the server's transport settings.
type GRPCConfig struct {
	// KeepaliveTime: the server pings a connection idle this long, and
	// closes it if no answer comes within KeepaliveTimeout, so that a
	// crashed client's streams end (its sessions then run to their TTL).
	KeepaliveTime    time.Duration `mapstructure:"keepalive_time"`
	KeepaliveTimeout time.Duration `mapstructure:"keepalive_timeout"`
	// MinClientPing is the shortest interval at which a client may ping;
	// faster pings close its connection (GOAWAY "too many pings").
	MinClientPing time.Duration `mapstructure:"min_client_ping"`
	// StreamWorkers: goroutines kept to serve calls, instead of one new
	// goroutine per call (whose stack grows, at a cost, in every call);
	// default 128; 0: one per CPU.
	StreamWorkers int `mapstructure:"stream_workers"`
}

// AuthSection is the auth section: server.AuthConfig, and a file of more
// API keys (e.g. a mounted Kubernetes Secret), in the same form as
// auth.api_keys, read at start and on every reload.
type AuthSection struct {
	server.AuthConfig `mapstructure:",squash"`
	APIKeysFile       string `mapstructure:"api_keys_file"`
}

// config returns the auth configuration with the file's keys added.
func (a AuthSection) config() (server.AuthConfig, error) {
	cfg := a.AuthConfig
	if a.APIKeysFile == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(a.APIKeysFile)
	if err != nil {
		return cfg, fmt.Errorf("auth.api_keys_file: %w", err)
	}
	keys, err := parseAPIKeys(b)
	if err != nil {
		return cfg, fmt.Errorf("auth.api_keys_file %s: %w", a.APIKeysFile, err)
	}
	cfg.APIKeys = append(slices.Clone(cfg.APIKeys), keys...)
	return cfg, nil
}

// parseAPIKeys reads an api_keys_file: a YAML list of {namespace, key or
// key_sha256}. It walks the YAML itself rather than decoding into a struct
// because its errors are logged (a failed reload) and must never quote the
// file's text, which holds keys: the YAML decoder's do ("cannot unmarshal
// !!str `the-sec...`", "field <text> not found", "unknown anchor '<text>'").
// Its errors give a line and a field name it knows, never a value.
func parseAPIKeys(b []byte) ([]server.APIKey, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		// Dropped, not wrapped: the parser's message may quote the text.
		return nil, errors.New("not valid YAML (the parser's message is left out: it may quote a key)")
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file
	}
	const want = "a list of {namespace, key or key_sha256}"
	list := doc.Content[0]
	if list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: not %s", list.Line, want)
	}
	var keys []server.APIKey
	for _, e := range list.Content {
		if e.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("line %d: an entry that is not a mapping; want %s", e.Line, want)
		}
		var k server.APIKey
		seen := map[string]bool{}
		for i := 0; i+1 < len(e.Content); i += 2 {
			name, v := e.Content[i], e.Content[i+1]
			field := map[string]*string{"namespace": &k.Namespace, "key": &k.Key, "key_sha256": &k.KeySHA256}[name.Value]
			if name.Kind != yaml.ScalarNode || field == nil {
				return nil, fmt.Errorf("line %d: a field other than namespace, key and key_sha256", name.Line)
			}
			if seen[name.Value] {
				return nil, fmt.Errorf("line %d: %s given twice", name.Line, name.Value)
			}
			seen[name.Value] = true
			if v.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: %s is not a string", v.Line, name.Value)
			}
			if v.Tag != "!!null" {
				*field = v.Value
			}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// RateLimit is the ratelimit section.
type RateLimit struct {
	limiter.Config `mapstructure:",squash"`
	// Policies is a list, not a map, because viper lowercases map keys and
	// a policy's name must reach clients as written.
	Policies []PolicyConfig `mapstructure:"policies"`
	// EnvoyConfig names a directory of envoyproxy/ratelimit's own YAML
	// files (its RUNTIME_ROOT's config directory), read unchanged, for
	// Envoy's ShouldRateLimit on coordd's gRPC port; reloaded on SIGHUP
	// and when a file in it changes. "": none.
	EnvoyConfig string `mapstructure:"envoy_config"`
}

// PolicyConfig is one named rate-limit policy: one limit (algorithm,
// limit, period, burst), or several (limits), all of which must allow a
// call.
type PolicyConfig struct {
	Name      string        `mapstructure:"name"`
	Algorithm string        `mapstructure:"algorithm"`
	Limit     int64         `mapstructure:"limit"`
	Period    time.Duration `mapstructure:"period"`
	Burst     int64         `mapstructure:"burst"`
	Limits    []LimitConfig `mapstructure:"limits"`
	Shadow    bool          `mapstructure:"shadow"`
	// OnStoreFailure: fail_closed (the default), fail_open or local
	// (limiter.OnStoreFailure).
	OnStoreFailure string `mapstructure:"on_store_failure"`
	// FailOpen: true is on_store_failure fail_open.
	FailOpen bool `mapstructure:"fail_open"`
	// LocalQuota: units each instance takes from the store at a time, to
	// answer a hot key locally (limiter.Policy.LocalQuota); 0: none.
	LocalQuota int64 `mapstructure:"local_quota"`
}

// LimitConfig is one of a policy's several limits, named for the answers
// it denies (denied_by).
type LimitConfig struct {
	Name      string        `mapstructure:"name"`
	Algorithm string        `mapstructure:"algorithm"`
	Limit     int64         `mapstructure:"limit"`
	Period    time.Duration `mapstructure:"period"`
	Burst     int64         `mapstructure:"burst"`
}

// DefaultConfig returns the documented defaults, which run out of the box.
func DefaultConfig() Config {
	sc := server.DefaultConfig()
	c := Config{
		GRPCAddr:        "127.0.0.1:7070",
		HTTPAddr:        "127.0.0.1:7071",
		Store:           "memory",
		LogLevel:        "info",
		LogFormat:       "text",
		ShutdownTimeout: 10 * time.Second,
		Lock:            sc.Lock,
		Semaphore:       sc.Semaphore,
		Election:        sc.Election,
		Session:         sc.Session,
		RateLimit:       RateLimit{Config: sc.Limiter, Policies: []PolicyConfig{}},
		Idempotency:     sc.Idem,
		Queue:           sc.Queue,
		Redis:           defaultRedisConfig(),
		UI:              console.DefaultConfig(),
		HTTPAPI:         gateway.DefaultConfig(),
	}
	c.Limits.MaxNameBytes = 256
	c.Limits.MaxWait = time.Minute
	c.Limits.MaxMessageBytes = 4 << 20
	c.Limits.MaxConcurrentStreams = 1000
	c.Limits.Limits = server.Limits{
		MaxWaitersPerNamespace: 10000, MaxWaitersPerConnection: 1000,
		MaxStreamsPerNamespace: 10000, MaxStreamsPerConnection: 1000,
		MaxStreamMessageRate: 10, ShedStoreLatency: 250 * time.Millisecond,
	}
	c.GRPC = GRPCConfig{KeepaliveTime: 30 * time.Second, KeepaliveTimeout: 10 * time.Second, MinClientPing: 10 * time.Second, StreamWorkers: 128}
	c.Auth.APIKeys = []server.APIKey{}
	c.Auth.MTLS = []server.Identity{}
	c.Metrics.Queues = []metrics.QueueRef{}
	c.Queue.Partitioned = []queue.Partitioned{}
	c.Memory.SweepInterval = time.Second
	return c
}

// loadConfig builds the configuration from defaults, then the YAML file named
// by --config, then COORDD_* environment variables (COORDD_QUEUE_MAX_DELAY for
// queue.max_delay), then flags, each overriding the one before. Unknown keys
// in the file are errors.
func loadConfig(args []string) (Config, error) {
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("coordd", pflag.ContinueOnError)
	configFile := fs.String("config", "", "YAML configuration file")
	fs.String("grpc-addr", cfg.GRPCAddr, "gRPC listen address (grpc_addr)")
	fs.String("http-addr", cfg.HTTPAddr, "HTTP listen address for /metrics and /healthz (http_addr)")
	fs.String("store", cfg.Store, "storage backend: memory or redis (store)")
	fs.String("log-level", cfg.LogLevel, "debug, info, warn or error (log_level)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if *showVersion {
		return Config{}, errVersion
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	v := viper.New()
	setDefaults(v, "", reflect.ValueOf(cfg))
	for key, flag := range map[string]string{"grpc_addr": "grpc-addr", "http_addr": "http-addr", "store": "store", "log_level": "log-level"} {
		if err := v.BindPFlag(key, fs.Lookup(flag)); err != nil {
			return Config{}, err
		}
	}
	v.SetEnvPrefix("COORDD")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	if *configFile != "" {
		v.SetConfigFile(*configFile)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("reading %s: %w", *configFile, err)
		}
	}
	source := valueSource(v, fs, *configFile)
	err := v.UnmarshalExact(&cfg, func(dc *mapstructure.DecoderConfig) {
		dc.WeaklyTypedInput = false
		dc.DecodeHook = strictDecode
	})
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", decodeErrors(err, source))
	}
	if err := cfg.renamed(source); err != nil {
		return cfg, err
	}
	cfg.applyLimits()
	if err := cfg.Validate(); err != nil {
		return cfg, decodeErrors(err, source)
	}
	return cfg, nil
}

// valueSource returns what to add to an error about key to say where its
// value came from, as viper chose it: a flag, then a non-empty environment
// variable, then the file. A key inside a list (ratelimit.policies[0].limit)
// came from wherever the list did.
func valueSource(v *viper.Viper, fs *pflag.FlagSet, file string) func(key string) string {
	return func(key string) string {
		key, _, _ = strings.Cut(key, "[")
		for k, f := range map[string]string{"grpc_addr": "grpc-addr", "http_addr": "http-addr", "store": "store", "log_level": "log-level"} {
			if k == key && fs.Changed(f) {
				return "; set by --" + f
			}
		}
		env := "COORDD_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		if os.Getenv(env) != "" {
			return "; set by " + env
		}
		if file != "" && v.InConfig(key) {
			return "; set in " + file
		}
		return ""
	}
}

// errVersion is loadConfig's answer to --version.
var errVersion = errors.New("--version")

// unknownEnv returns the COORDD_* variables of environ that name no
// configuration key (a typo would otherwise be ignored without a word).
func unknownEnv(environ []string) []string {
	v := viper.New()
	setDefaults(v, "", reflect.ValueOf(DefaultConfig()))
	known := map[string]bool{}
	for _, k := range v.AllKeys() {
		known["COORDD_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_"))] = true
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "COORDD_") && !known[name] {
			unknown = append(unknown, name)
		}
	}
	return unknown
}

// setDefaults registers every key of the struct rv with its default value,
// so that viper knows every key (environment variables only reach known
// keys).
func setDefaults(v *viper.Viper, prefix string, rv reflect.Value) {
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		key := prefix + name
		if opts == "squash" {
			key = strings.TrimSuffix(prefix, ".")
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			p := key + "."
			if key == "" {
				p = ""
			}
			setDefaults(v, p, rv.Field(i))
			continue
		}
		v.SetDefault(key, rv.Field(i).Interface())
	}
}

// renamed moves the values of deprecated keys to the keys that replaced
// them, noting a warning for each (Config.Deprecated): lock.max_locks_per_session
// is session.max_holds. Both set, to different values, is an error.
func (c *Config) renamed(source func(key string) string) error {
	if old := source("lock.max_locks_per_session"); old != "" {
		n := c.Lock.MaxLocksPerSession
		if source("session.max_holds") != "" && c.Session.MaxHolds != n {
			return fmt.Errorf("lock.max_locks_per_session (%d%s) is the old name of session.max_holds (%d%s): set only session.max_holds",
				n, old, c.Session.MaxHolds, source("session.max_holds"))
		}
		if n < 1 || n > hold.MaxSessionHoldsLimit {
			return fmt.Errorf("lock.max_locks_per_session (now session.max_holds): must be between 1 and %d, got %d%s", hold.MaxSessionHoldsLimit, n, old)
		}
		c.Session.MaxHolds = n
		c.Deprecated = append(c.Deprecated, "lock.max_locks_per_session is deprecated: it is session.max_holds now (it counts locks, permits and leaderships)")
	}
	return nil
}

// applyLimits copies the shared limits into the sections that use them.
func (c *Config) applyLimits() {
	c.Lock.MaxWait, c.Lock.MaxNameBytes = c.Limits.MaxWait, c.Limits.MaxNameBytes
	c.Semaphore.MaxWait, c.Semaphore.MaxNameBytes = c.Limits.MaxWait, c.Limits.MaxNameBytes
	c.Election.MaxWait, c.Election.MaxNameBytes = c.Limits.MaxWait, c.Limits.MaxNameBytes
	// A session's holds of every kind count against one bound.
	c.Lock.MaxSessionHolds, c.Semaphore.MaxSessionHolds, c.Election.MaxSessionHolds = c.Session.MaxHolds, c.Session.MaxHolds, c.Session.MaxHolds
	c.Idempotency.MaxWait, c.Idempotency.MaxNameBytes = c.Limits.MaxWait, c.Limits.MaxNameBytes
	c.Queue.MaxWait, c.Queue.MaxNameBytes = c.Limits.MaxWait, c.Limits.MaxNameBytes
	c.RateLimit.MaxNameBytes, c.RateLimit.MaxWait = c.Limits.MaxNameBytes, c.Limits.MaxWait
}

// Validate checks every field, naming the key of each bad one. The domain
// sections check themselves (lock.Config.Validate, ...); what is checked
// here is the daemon's own: addresses, logging, transport, and the limits
// that bind several sections at once.
func (c *Config) Validate() error {
	var v validate.Checks
	if c.GRPCAddr == "" {
		v.Bad("grpc_addr", "is required")
	}
	if c.HTTPAddr == "" {
		v.Bad("http_addr", "is required")
	}
	switch c.Store {
	case "memory":
	case "redis":
		c.Redis.validate(v.Bad)
	default:
		v.Bad("store", "%q is not memory or redis", c.Store)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		v.Bad("log_level", "%v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		v.Bad("log_format", "%q is not text or json", c.LogFormat)
	}
	v.Positive("shutdown_timeout", c.ShutdownTimeout)
	// limits.max_name_bytes and limits.max_wait are copied into the domain
	// sections (applyLimits), which check them too; v reports each once.
	v.AtLeast1("limits.max_name_bytes", int64(c.Limits.MaxNameBytes))
	if c.Limits.MaxWait < 0 {
		v.Bad("limits.max_wait", "must not be negative, got %v", c.Limits.MaxWait)
	}
	if min := c.Idempotency.MaxResultBytes + 64<<10; c.Limits.MaxMessageBytes < min {
		v.Bad("limits.max_message_bytes", "(%d) must leave room for idempotency.max_result_bytes: at least %d", c.Limits.MaxMessageBytes, min)
	}
	if min := c.Queue.MaxPayloadBytes + 64<<10; c.Limits.MaxMessageBytes < min {
		v.Bad("limits.max_message_bytes", "(%d) must leave room for queue.max_payload_bytes: at least %d", c.Limits.MaxMessageBytes, min)
	}
	v.AtLeast1("limits.max_concurrent_streams", int64(c.Limits.MaxConcurrentStreams))
	v.Add(c.Limits.Limits.Validate())
	c.TLS.validate(v.Bad)
	c.GRPC.validate(&v)
	if auth, err := c.Auth.config(); err != nil {
		v.Add(err)
	} else {
		v.Add(auth.Validate())
	}
	for i, q := range c.Metrics.Queues {
		if !server.ValidNamespace(q.Namespace) || q.Name == "" {
			v.Bad(fmt.Sprintf("metrics.queues[%d]", i), "needs a namespace ([A-Za-z0-9._-]) and a name")
		}
	}
	v.Positive("memory.sweep_interval", c.Memory.SweepInterval)

	v.Add(c.Lock.Validate())
	v.Add(c.Semaphore.Validate())
	v.Add(c.Election.Validate())
	v.Add(c.Session.Validate())
	v.Add(c.RateLimit.Config.Validate())
	v.Add(c.Idempotency.Validate())
	v.Add(c.Queue.Validate())
	v.Add(c.UI.Validate())
	_, err := c.policies()
	v.Add(err)
	// ratelimit.envoy_config's files are read once, by newDaemon or a
	// reload (envoyConfig), not here as well.
	return v.Err()
}

func (c GRPCConfig) validate(v *validate.Checks) {
	v.Positive("grpc.keepalive_time", c.KeepaliveTime)
	v.Positive("grpc.keepalive_timeout", c.KeepaliveTimeout)
	v.Positive("grpc.min_client_ping", c.MinClientPing)
	if c.StreamWorkers < 0 {
		v.Bad("grpc.stream_workers", "must not be negative (0: one per CPU)")
	}
}

// envoyConfig loads ratelimit.envoy_config's files, or nil if unset. Its
// error names the file and line.
func (c *Config) envoyConfig() (*envoyrl.Config, error) {
	if c.RateLimit.EnvoyConfig == "" {
		return nil, nil
	}
	ec, err := envoyrl.Load(c.RateLimit.EnvoyConfig)
	if err != nil {
		return nil, fmt.Errorf("ratelimit.envoy_config: %w", err)
	}
	return ec, nil
}

// policies converts the configured policies, checking each against the
// limiter's bounds.
func (c *Config) policies() (map[string]limiter.Policy, error) {
	out := make(map[string]limiter.Policy, len(c.RateLimit.Policies))
	for i, p := range c.RateLimit.Policies {
		if p.Name == "" {
			return nil, fmt.Errorf("ratelimit.policies[%d].name: is required", i)
		}
		if _, dup := out[p.Name]; dup {
			return nil, fmt.Errorf("ratelimit.policies[%d].name: %q is already the name of another policy", i, p.Name)
		}
		pol := limiter.Policy{Shadow: p.Shadow, LocalQuota: p.LocalQuota}
		var err error
		if pol.OnStoreFailure, err = p.onStoreFailure(); err != nil {
			return nil, err
		}
		if len(p.Limits) > 0 {
			if p.Algorithm != "" || p.Limit != 0 || p.Period != 0 || p.Burst != 0 {
				return nil, fmt.Errorf("ratelimit.policies.%s.limits: and the policy's own algorithm, limit, period and burst are both set; set one", p.Name)
			}
			for j, l := range p.Limits {
				alg, err := limiter.ParseAlgorithm(l.Algorithm)
				if err != nil {
					return nil, fmt.Errorf("ratelimit.policies.%s.limits[%d].algorithm: %w", p.Name, j, err)
				}
				pol.Limits = append(pol.Limits, limiter.NamedLimit{Name: l.Name,
					Limit: store.Limit{Algorithm: alg, Limit: l.Limit, Period: l.Period, Burst: l.Burst}})
			}
		} else {
			alg, err := limiter.ParseAlgorithm(p.Algorithm)
			if err != nil {
				return nil, fmt.Errorf("ratelimit.policies.%s.algorithm: %w", p.Name, err)
			}
			pol.Limit = store.Limit{Algorithm: alg, Limit: p.Limit, Period: p.Period, Burst: p.Burst}
		}
		out[p.Name] = pol
	}
	if err := c.RateLimit.Config.CheckPolicies(out); err != nil {
		return nil, err
	}
	return out, nil
}

// onStoreFailure reads on_store_failure, with fail_open: true as a
// synonym of fail_open.
func (p PolicyConfig) onStoreFailure() (limiter.OnStoreFailure, error) {
	if p.OnStoreFailure == "" {
		if p.FailOpen {
			return limiter.FailOpen, nil
		}
		return 0, nil
	}
	f, err := limiter.ParseOnStoreFailure(p.OnStoreFailure)
	if err != nil {
		return 0, fmt.Errorf("ratelimit.policies.%s.on_store_failure: %w", p.Name, err)
	}
	if p.FailOpen && f != limiter.FailOpen {
		return 0, fmt.Errorf("ratelimit.policies.%s.on_store_failure: is %s, and fail_open is true; set one (fail_open: true is on_store_failure: fail_open)", p.Name, p.OnStoreFailure)
	}
	return f, nil
}

// strictDecode converts configuration values without guessing: strings (from
// the environment or flags) are parsed as the field's type, a duration must
// carry its unit ("10s", not 10, which would be nanoseconds), and a number is
// never truncated, wrapped or rounded to fit. Its errors say what the value
// should be, in words; the key and the value's source are added by
// decodeErrors.
func strictDecode(from, to reflect.Type, data any) (any, error) {
	if to == reflect.TypeOf(time.Duration(0)) {
		switch v := data.(type) {
		case string:
			d, err := time.ParseDuration(v)
			if err == nil {
				return d, nil
			}
			if _, ferr := strconv.ParseFloat(v, 64); ferr == nil {
				return nil, fmt.Errorf("%q is not a duration: write it with a unit, such as 10s or 5m", v)
			}
			return nil, fmt.Errorf("%q is not a duration: a number and a unit (ns, us, ms, s, m, h), such as 10s or 1h30m, of at most %v", v, time.Duration(math.MaxInt64))
		case time.Duration:
			return v, nil
		default:
			return nil, fmt.Errorf("%v is not a duration: write it with a unit, such as 10s or 5m", data)
		}
	}
	switch to.Kind() {
	case reflect.Slice:
		if v, ok := data.(string); ok {
			if to.Elem().Kind() == reflect.String {
				return strings.Split(v, ","), nil // a list from the environment: a,b,c
			}
			return nil, fmt.Errorf("is a list of tables, which only the configuration file can set")
		}
		if k := reflect.TypeOf(data); k != nil && k.Kind() != reflect.Slice && k.Kind() != reflect.Array {
			return nil, fmt.Errorf("%v is not a list", data)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return wholeNumber(data, to.Bits())
	case reflect.Float32, reflect.Float64:
		var f float64
		switch v := data.(type) {
		case string:
			var err error
			if f, err = strconv.ParseFloat(v, to.Bits()); err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, fmt.Errorf("%q is not a number", v)
			}
		case float64:
			f = v
		case int:
			f = float64(v)
		case int64:
			f = float64(v)
		case uint64:
			f = float64(v)
		default:
			return nil, fmt.Errorf("%v is not a number", data)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) || (to.Bits() == 32 && math.Abs(f) > math.MaxFloat32) {
			return nil, fmt.Errorf("%s is not a finite number", shown(data))
		}
		return f, nil
	case reflect.Bool:
		switch v := data.(type) {
		case bool:
			return v, nil
		case string:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%q is not true or false", v)
			}
			return b, nil
		default:
			return nil, fmt.Errorf("%v is not true or false", data)
		}
	}
	return data, nil
}

// wholeNumber converts data to an integer of bits bits, or says why not:
// YAML gives int, uint64 (above MaxInt64) or float64 (1e3, 2.5, and integers
// too large for either), the environment strings.
func wholeNumber(data any, bits int) (int64, error) {
	lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
	outOfRange := func(negative bool) (int64, error) {
		if negative {
			return 0, fmt.Errorf("%s is too small: at least %d", shown(data), lo)
		}
		return 0, fmt.Errorf("%s is too large: at most %d", shown(data), hi)
	}
	switch v := data.(type) {
	case string:
		n, err := strconv.ParseInt(v, 10, bits)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return outOfRange(strings.HasPrefix(v, "-"))
		case err != nil:
			return 0, fmt.Errorf("%q is not a whole number", v)
		}
		return n, nil
	case int:
		if int64(v) < lo || int64(v) > hi {
			return outOfRange(v < 0)
		}
		return int64(v), nil
	case int64:
		if v < lo || v > hi {
			return outOfRange(v < 0)
		}
		return v, nil
	case uint64:
		if v > uint64(hi) {
			return outOfRange(false)
		}
		return int64(v), nil
	case float64:
		if v != math.Trunc(v) {
			return 0, fmt.Errorf("%v is not a whole number", v)
		}
		// float64(hi) rounds up to 2^(bits-1), itself out of range.
		if v < float64(lo) || v >= float64(hi) {
			return outOfRange(v < 0)
		}
		return int64(v), nil
	default:
		return 0, fmt.Errorf("%v is not a whole number", data)
	}
}

// shown is a value as an error quotes it: a string in quotes, so that an
// empty or spaced one shows.
func shown(data any) string {
	if s, ok := data.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(data)
}

// decodeErrors rewrites the errors of decoding the configuration one a line,
// each naming its key and where the value came from: "; set by COORDD_…"
// when from the environment, "; set in FILE" when from the file (see
// valueSource). The checks' errors (validate.KeyError) get the same suffix.
func decodeErrors(err error, source func(key string) string) error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range e.Unwrap() {
				walk(e)
			}
		case *mapstructure.DecodeError:
			inner := e.Unwrap()
			switch inner.(type) {
			case interface{ Unwrap() []error }:
				walk(inner)
			default:
				if e.Name() == "" {
					out = append(out, inner)
				} else {
					out = append(out, fmt.Errorf("%s: %w%s", e.Name(), inner, source(e.Name())))
				}
			}
		case *validate.KeyError:
			out = append(out, fmt.Errorf("%w%s", e, source(e.Key)))
		default:
			out = append(out, err)
		}
	}
	// mapstructure wraps its list in "decoding failed due to ...": unwrap
	// down to the list.
	for {
		switch err.(type) {
		case interface{ Unwrap() []error }, *mapstructure.DecodeError, *validate.KeyError:
		default:
			if u := errors.Unwrap(err); u != nil {
				err = u
				continue
			}
		}
		break
	}
	walk(err)
	return errors.Join(out...)
}
