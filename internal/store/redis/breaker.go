package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// Breakers are circuit breakers, one per Redis node, installed as go-redis
// hooks on every node's client, so that each command — whatever operation
// it belongs to, and however many nodes that operation visits — is judged
// by the node it goes to: after Failures consecutive failures to reach a
// node (each command of a pipeline counting as one), commands to it fail at
// once for Cooldown, then one probes; no connection to it is dialled
// meanwhile. A dead
// Cluster master thus fails fast without failing the commands that go to
// the others.
//
// A command that timed out counts only if the node answered nothing since
// it was sent: a node that answers other commands meanwhile is slow, not
// gone — saturated, most often by coordd's own load — and opening its
// breaker would fail every heartbeat to it and end live sessions, which
// overload must never do (the server sheds new work by the store's
// latency instead). A refused or broken connection always counts.
type Breakers struct {
	opts BreakerOptions
	mu   sync.Mutex
	all  map[string]*breaker // by node address
}

// BreakerOptions configures the circuit breakers.
type BreakerOptions struct {
	Failures int           // consecutive failures that open it; default 5
	Cooldown time.Duration // how long it stays open; default 1s
}

// errBreakerOpen is the error of a command refused by an open breaker.
var errBreakerOpen = fmt.Errorf("%w: circuit breaker open", store.ErrUnavailable)

// NewBreakers installs breakers on client: on each node of a Cluster (as go-
// redis creates them), or on the client of a standalone or Sentinel Redis.
// Install them once per client, before its first command.
func NewBreakers(client redis.UniversalClient, opts BreakerOptions) *Breakers {
	if opts.Failures <= 0 {
		opts.Failures = 5
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = time.Second
	}
	bs := &Breakers{opts: opts, all: make(map[string]*breaker)}
	switch c := client.(type) {
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) { node.AddHook(bs.hook(node.Options().Addr)) })
	default:
		client.AddHook(bs.hook(""))
	}
	return bs
}

// Open reports how many breakers are open.
func (bs *Breakers) Open() int {
	if bs == nil {
		return 0
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	n := 0
	for _, b := range bs.all {
		if b.isOpen() {
			n++
		}
	}
	return n
}

func (bs *Breakers) hook(node string) breakerHook {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.all[node]
	if b == nil {
		b = &breaker{opts: bs.opts}
		bs.all[node] = b
	}
	return breakerHook{b}
}

// breakerHook is a go-redis hook that runs commands through a breaker.
type breakerHook struct{ b *breaker }

// DialHook refuses to open a connection to a node whose breaker is open. The
// commands of the main pool are refused before they need one; this keeps the
// pub/sub connections (which carry no command the breaker sees) from dialing
// a node known to be down: a Subscribe then fails at once, and its waiter
// polls.
func (h breakerHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.b.isOpen() {
			return nil, errBreakerOpen
		}
		return next(ctx, network, addr)
	}
}

// setupCommands are those go-redis sends while it opens a connection; they
// belong to the command that needed the connection, so they must not take
// (or be refused) the breaker's probe.
var setupCommands = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "readonly": true}

func (h breakerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if setupCommands[cmd.Name()] {
			return next(ctx, cmd)
		}
		if !h.b.allow() {
			cmd.SetErr(errBreakerOpen)
			return errBreakerOpen
		}
		sent := time.Now()
		err := next(ctx, cmd)
		if err == nil {
			err = cmd.Err()
		}
		h.b.record(ctx, err, sent)
		return err
	}
}

func (h breakerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		setup := true
		for _, c := range cmds {
			setup = setup && setupCommands[c.Name()]
		}
		if setup {
			return next(ctx, cmds)
		}
		if !h.b.allow() {
			for _, c := range cmds {
				c.SetErr(errBreakerOpen)
			}
			return errBreakerOpen
		}
		sent := time.Now()
		err := next(ctx, cmds)
		// Each command counts, as if sent alone: a batch of scripts that
		// a dead node failed is that many failures, not one.
		for _, c := range cmds {
			if !setupCommands[c.Name()] {
				h.b.record(ctx, c.Err(), sent)
			}
		}
		return err
	}
}

// breaker is a consecutive-failure circuit breaker: closed, it counts
// failures; open, it rejects calls until its cooldown ends; then it lets one
// call probe, which closes it on success and opens it again on failure.
type breaker struct {
	opts      BreakerOptions
	mu        sync.Mutex
	failures  int
	openUntil time.Time
	probing   bool
	answered  time.Time // when the node last answered a command
}

func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() {
		return true
	}
	if time.Now().Before(b.openUntil) || b.probing {
		return false
	}
	b.probing = true
	return true
}

// record counts the outcome of a command sent at sent: a reply, even an
// error reply, means the node answered; a failure to get one is a failure,
// unless the caller gave up first, or it is a timeout while the node
// answered other commands sent no earlier (it is slow, not gone).
func (b *breaker) record(ctx context.Context, err error, sent time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	switch {
	case err == nil || !reachFailure(err):
		b.failures, b.openUntil = 0, time.Time{}
		b.answered = time.Now()
	case errors.Is(err, context.Canceled) || ctx.Err() == context.Canceled:
		// The caller gave up: nothing learnt about the node.
	case timedOut(err) && b.answered.After(sent):
		// Slow, not gone: the node answered a command sent no earlier.
	default:
		b.failures++
		if b.failures >= b.opts.Failures || !b.openUntil.IsZero() {
			b.openUntil = time.Now().Add(b.opts.Cooldown)
		}
	}
}

func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.openUntil.IsZero() && time.Now().Before(b.openUntil)
}

// timedOut reports whether err is a timeout (the node did not answer in
// time), as opposed to a refused or broken connection.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var nerr net.Error
	return errors.As(err, &nerr) && nerr.Timeout()
}

// reachFailure reports whether err means the node could not be reached or
// could not serve: no reply at all, or one of the replies a node gives while
// it cannot (loading, cluster down, a read-only former master). A command
// the eviction guard refused is neither: the node answered its INFO.
func reachFailure(err error) bool {
	var eerr *EvictionError
	if errors.As(err, &eerr) {
		return false // the node answered; the eviction guard refused it
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		var nerr net.Error
		if errors.As(err, &nerr) {
			return true
		}
		for _, p := range []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY", "BUSY"} {
			if strings.HasPrefix(rerr.Error(), p) {
				return true
			}
		}
		return false
	}
	return !errors.Is(err, redis.Nil)
}

// state is the breaker of node's state: "open", "closed", or "" when there
// are no breakers or none for node yet (no command has gone to it).
func (bs *Breakers) state(node string) string {
	if bs == nil {
		return ""
	}
	bs.mu.Lock()
	b := bs.all[node]
	bs.mu.Unlock()
	switch {
	case b == nil:
		return ""
	case b.isOpen():
		return "open"
	default:
		return "closed"
	}
}
