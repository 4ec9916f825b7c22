package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	coordredis "github.com/coordd/coordd/internal/store/redis"
)

// The "direct" baseline sends coordd's own Lua scripts straight to Redis
// with go-redis: what an application embedding the same logic as a library
// would do. Scripts that bind their arguments by name are taken from the
// store itself (redis.ScriptSource: the source it runs, and its arguments'
// names); those of an older tree (--lua-dir) are read from its
// internal/store/redis/lua and composed as that tree's scripts.go did. The
// keys follow internal/store/redis/keys.go, under a namespace of their
// own.

const luaSubdir = "internal/store/redis/lua"

// directNS is the namespace of the direct baseline's keys, so that they
// never meet coordd's (whose calls are in --namespace, "default").
const directNS = "coordbench-direct"

// luaScripts are the scripts the direct baseline runs.
type luaScripts struct {
	limit map[string]*redis.Script // by algorithm name
	// limitOne: limit's scripts are limit_allow.lua (a coordd with one
	// script for every algorithm and for several limits), whose arguments
	// limitArgs builds; else one script per algorithm.
	limitOne     bool
	lockAcquire  *redis.Script
	lockRelease  *redis.Script
	idemBegin    *redis.Script
	idemFinish   *redis.Script
	queueEnqueue *redis.Script
	queueClaim   *redis.Script
	queueAck     *redis.Script
	queueStats   *redis.Script
	// queueV2: the queue scripts take the wake-up channel as ARGV[4], a
	// priority and a group (a coordd with priorities and groups), and claim
	// answers 10 values a message; else the channel is Enqueue's last
	// argument and claim answers 8.
	queueV2 bool
	// claimHead: the values before the messages in the claim script's
	// answer.
	claimHead int
	// named: the scripts' arguments by script, as lua tags
	// (coordredis.ScriptSource), when they bind them by name; nil for
	// scripts that read them by position.
	named map[string][]string
}

// byName returns script's arguments from vals by their Lua names, after
// the time arguments; an argument vals lacks is its zero ("", 0, false),
// a rest argument ([]any) is spread.
func (s *luaScripts) byName(script string, vals map[string]any) []any {
	out := append([]any(nil), timeArgs...)
	for _, tag := range s.named[script] {
		name, conv, _ := strings.Cut(tag, ",")
		v, ok := vals[name]
		switch {
		case conv == "rest" || conv == "intrest":
			rest, _ := v.([]any)
			out = append(out, rest...)
			continue
		case ok:
		case conv == "int":
			v = 0
		case conv == "bool":
			v = "0"
		default:
			v = ""
		}
		if b, isBool := v.(bool); isBool {
			v = map[bool]string{true: "1", false: "0"}[b]
		}
		out = append(out, v)
	}
	return out
}

func (s *luaScripts) all() []*redis.Script {
	out := []*redis.Script{s.lockAcquire, s.lockRelease, s.idemBegin, s.idemFinish, s.queueEnqueue, s.queueClaim, s.queueAck, s.queueStats}
	for _, name := range algorithmNames {
		out = append(out, s.limit[name])
	}
	return out
}

// findLuaDir returns dir if set, else internal/store/redis/lua of the first
// repository found walking up from the working directory, then from the
// executable's directory.
func findLuaDir(dir string) (string, error) {
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "prelude.lua")); err != nil {
			return "", fmt.Errorf("--lua-dir: %w", err)
		}
		return dir, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			cand := filepath.Join(d, luaSubdir)
			if _, err := os.Stat(filepath.Join(cand, "prelude.lua")); err == nil {
				return cand, nil
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", errors.New("coordd's Lua scripts (" + luaSubdir + ") not found above the working directory or the executable: run from the repository or set --lua-dir")
}

// loadLua reads and composes the scripts: prelude + script, for the queue
// prelude + queue_prelude + script, for the locks prelude + hold_prelude +
// script (scripts.go's newScript, queueScript and holdScript).
func loadLua(dir string) (*luaScripts, error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name+".lua"))
		return string(b), err
	}
	var firstErr error
	prelude, err := read("prelude")
	if err != nil {
		return nil, err
	}
	// Scripts that bind their arguments by name (a prelude that reads no
	// ARGV) are taken as the store composes them, header included.
	var named map[string][]string
	if !strings.Contains(prelude, "ARGV[") {
		named = map[string][]string{}
	}
	get := func(names ...string) *redis.Script {
		if named != nil {
			last := names[len(names)-1]
			src, args, ok := coordredis.ScriptSource(last)
			if !ok && firstErr == nil {
				firstErr = fmt.Errorf("coordd has no script %s", last)
			}
			named[last] = args
			return redis.NewScript(src)
		}
		src := ""
		for _, n := range names {
			s, err := read(n)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			src += s
		}
		return redis.NewScript(src)
	}
	script := func(name string) *redis.Script { return get("prelude", name) }
	queueScript := func(name string) *redis.Script { return get("prelude", "queue_prelude", name) }
	holdScript := func(name string) *redis.Script { return get("prelude", "hold_prelude", name) }
	limit := map[string]*redis.Script{}
	limitOne := false
	if _, err := os.Stat(filepath.Join(dir, "limit_allow.lua")); err == nil {
		one := get("prelude", "limit_prelude", "limit_allow")
		for _, name := range algorithmNames {
			limit[name] = one
		}
		limitOne = true
	} else {
		limit = map[string]*redis.Script{
			"fixed_window":   script("limit_fixed_window"),
			"sliding_window": script("limit_sliding_window"),
			"sliding_log":    script("limit_sliding_log"),
			"token_bucket":   script("limit_gcra"),
			"leaky_bucket":   script("limit_gcra"),
		}
	}
	s := &luaScripts{
		named:        named,
		limit:        limit,
		limitOne:     limitOne,
		lockAcquire:  holdScript("hold_acquire"),
		lockRelease:  holdScript("hold_release"),
		idemBegin:    script("idem_begin"),
		idemFinish:   script("idem_finish"),
		queueEnqueue: queueScript("queue_enqueue"),
		queueClaim:   queueScript("queue_claim"),
		queueAck:     queueScript("queue_ack"),
		queueStats:   queueScript("queue_stats"),
	}
	if p, err := read("queue_prelude"); err == nil && (strings.Contains(p, "gwait") || named != nil) {
		s.queueV2 = true
	}
	s.claimHead = 1
	if c, err := read("queue_claim"); err == nil && strings.Contains(c, "the setting that held ready messages back") {
		s.claimHead = 2 // the next due time, then what held messages back
	}
	return s, firstErr
}

// preload loads every script on every node (as coordd does at start), so
// that EVALSHA finds them.
func (s *luaScripts) preload(ctx context.Context, c redis.UniversalClient) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, sc := range s.all() {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return load(ctx, n) })
	}
	return load(ctx, c)
}

// keyLayout builds keys as internal/store/redis/keys.go does. Names are
// scoped by namespace as store.Scope does: "NS:name".
type keyLayout struct{ prefix string }

func (k keyLayout) tag(kind, name string) string { return k.prefix + ":{" + kind + ":" + name + "}" }

// lock is keys.hold for a lock: the order lua/hold_prelude.lua documents.
func (k keyLayout) lock(name string) []string {
	t := k.lockBase(name)
	return []string{t + ":h", t + ":dl", t + ":hs", t + ":q", t + ":ql", t + ":qi", t + ":qx", t + ":m", t + ":log"}
}

// lockBase is a lock's tag base, the hold scripts' ARGV[3].
func (k keyLayout) lockBase(name string) string { return k.tag("l", name) }

func (k keyLayout) lockChannel(name string) string { return k.tag("l", name) + ":ev" }

// limit is keys.limit: algorithm number, limit, period in µs and burst.
func (k keyLayout) limit(key string, l limitSpec) []string {
	t := k.tag("r", key) + ":" + strconv.Itoa(l.algorithm) + ":" + strconv.FormatInt(l.limit, 10) +
		":" + strconv.FormatInt(l.periodMicros, 10) + ":" + strconv.FormatInt(l.burst, 10)
	if l.name == "sliding_log" {
		return []string{t, t + ":sum"}
	}
	return []string{t}
}

func (k keyLayout) idem(key string) string        { return k.tag("i", key) }
func (k keyLayout) idemChannel(key string) string { return k.tag("i", key) + ":ev" }

func (k keyLayout) queue(name string) []string {
	t := k.tag("q", name)
	// The three keys after seq are unused by queue scripts without
	// priorities and groups, conf by those without settings.
	return []string{t + ":pending", t + ":inflight", t + ":last", t + ":dead", t + ":msg", t + ":meta",
		t + ":deadmsg", t + ":dedup", t + ":dedupexp", t + ":seq", t + ":ready", t + ":gheads", t + ":gwait", t + ":conf", t + ":deadprev"}
}

func (k keyLayout) queueChannel(name string) string { return k.tag("q", name) + ":ev" }

func scope(ns, name string) string { return ns + ":" + name }

// timeArgs are ARGV[1] and ARGV[2] of every script: the Redis server's TIME
// (-1) and no expiry slack (0), as coordd runs in production.
var timeArgs = []any{-1, 0}

func args(a ...any) []any { return append(append(make([]any, 0, 2+len(a)), timeArgs...), a...) }

// limitArgs are the arguments of spec's limit script for a call of cost 1,
// not a peek.
func (s *luaScripts) limitArgs(spec limitSpec) []any {
	if s.named != nil {
		return s.byName("limit_allow", map[string]any{"cost": 1, "n": 1,
			"params": []any{spec.algorithm, spec.limit, spec.periodMicros, spec.capacity()}})
	}
	if s.limitOne {
		return args(1, "0", 1, spec.algorithm, spec.limit, spec.periodMicros, spec.capacity())
	}
	return args(spec.limit, spec.periodMicros, 1, "0", spec.capacity())
}

// deadLetterTTL is queue.dead_letter_ttl's default, which every queue
// script takes as ARGV[3] (lua/queue_prelude.lua).
const deadLetterTTL = 336 * time.Hour

// queueArgs are the arguments of a queue script on queue: the time, the
// dead-letter ttl, the wake-up channel (queueV2), then a.
func (b *bench) queueArgs(queue string, a ...any) []any {
	if b.lua.named != nil { // the script's own arguments, in a
		return append(b.lua.byName("queue_stats", map[string]any{"deadTTL": deadLetterTTL.Microseconds(),
			"wakeChannel": b.keys.queueChannel(queue)}), a...)
	}
	pre := []any{deadLetterTTL.Microseconds()}
	if b.lua.queueV2 {
		pre = append(pre, b.keys.queueChannel(queue))
	}
	return args(append(pre, a...)...)
}

// claimFields is how many values the claim script answers per message.
func (s *luaScripts) claimFields() int {
	if s.queueV2 {
		return 10
	}
	return 8
}

// newRedisClient connects to the Redis of the baselines.
func newRedisClient(cfg *config) redis.UniversalClient {
	if cfg.RedisMode == "cluster" {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.Redis, PoolSize: cfg.RedisPool})
	}
	return redis.NewClient(&redis.Options{Addr: cfg.Redis[0], PoolSize: cfg.RedisPool})
}
