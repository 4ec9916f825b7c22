package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Limits against abuse that the server enforces itself; gRPC's own (message
// size, concurrent streams per connection) are server options. 0 means no
// limit.
type Limits struct {
	// MaxWaitersPerNamespace caps the calls of one namespace that are waiting
	// on this instance (a Lock, Acquire, Campaign, BeginIdempotent or Claim
	// with wait > 0, and every Observe stream).
	MaxWaitersPerNamespace int `mapstructure:"max_waiters_per_namespace"`
	// MaxWaitersPerConnection caps the waiting calls of one connection.
	MaxWaitersPerConnection int `mapstructure:"max_waiters_per_connection"`
	// MaxStreamsPerNamespace caps the KeepAlive streams of one namespace open
	// on this instance.
	MaxStreamsPerNamespace int `mapstructure:"max_streams_per_namespace"`
	// MaxStreamsPerConnection caps the KeepAlive streams of one connection.
	MaxStreamsPerConnection int `mapstructure:"max_streams_per_connection"`
	// MaxStreamMessageRate caps the heartbeats a KeepAlive stream may send per
	// second (with a burst of twice that); faster ends the stream.
	MaxStreamMessageRate float64 `mapstructure:"max_stream_messages_per_second"`
}

// gate counts calls in progress per namespace and per connection, and
// refuses those over the limits.
type gate struct {
	limits Limits
	mu     sync.Mutex
	counts map[gateKey]int
}

type gateKey struct {
	ns     string
	stream bool // a KeepAlive stream, else a waiting call
}

// conn is a connection's own counts, put in its context by connTagger.
type conn struct{ waiters, streams atomic.Int64 }

type connKey struct{}

// connTagger is a stats.Handler that gives every connection a *conn.
type connTagger struct{}

func (connTagger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connKey{}, &conn{})
}
func (connTagger) HandleConn(context.Context, stats.ConnStats)                     {}
func (connTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connTagger) HandleRPC(context.Context, stats.RPCStats)                       {}

// enter admits one waiting call (stream false) or KeepAlive stream (stream
// true) of namespace ns on the connection of ctx, or refuses it; admitted,
// it must be left with the returned func.
func (g *gate) enter(ctx context.Context, ns string, stream bool) (func(), error) {
	nsMax, connMax, reason := g.limits.MaxWaitersPerNamespace, g.limits.MaxWaitersPerConnection, "TOO_MANY_WAITERS"
	if stream {
		nsMax, connMax, reason = g.limits.MaxStreamsPerNamespace, g.limits.MaxStreamsPerConnection, "TOO_MANY_STREAMS"
	}
	c, _ := ctx.Value(connKey{}).(*conn)
	counter := func(c *conn) *atomic.Int64 {
		if stream {
			return &c.streams
		}
		return &c.waiters
	}
	if c != nil && connMax > 0 {
		if counter(c).Add(1) > int64(connMax) {
			counter(c).Add(-1)
			return nil, withDetails(codes.ResourceExhausted, "too many calls waiting or streams open on this connection", reason, nil)
		}
	} else {
		c = nil
	}
	k := gateKey{ns, stream}
	g.mu.Lock()
	if nsMax > 0 && g.counts[k] >= nsMax {
		g.mu.Unlock()
		if c != nil {
			counter(c).Add(-1)
		}
		return nil, withDetails(codes.ResourceExhausted, "too many calls waiting or streams open in this namespace", reason, nil)
	}
	g.counts[k]++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		if g.counts[k]--; g.counts[k] == 0 {
			delete(g.counts, k)
		}
		g.mu.Unlock()
		if c != nil {
			counter(c).Add(-1)
		}
	}, nil
}

// waits reports whether a request asks to wait: a Lock, Acquire,
// Campaign, BeginIdempotent or Claim with wait > 0.
func waits(req any) bool {
	w, ok := req.(interface{ GetWait() *durationpb.Duration })
	return ok && w.GetWait().AsDuration() > 0
}

// messageRate is a token bucket for one stream's messages.
type messageRate struct {
	rate, burst, tokens float64
	last                time.Time
}

func newMessageRate(perSecond float64) *messageRate {
	if perSecond <= 0 {
		return nil
	}
	return &messageRate{rate: perSecond, burst: 2 * perSecond, tokens: 2 * perSecond, last: time.Now()}
}

// allow takes one message's token, if there is one.
func (m *messageRate) allow() bool {
	if m == nil {
		return true
	}
	now := time.Now()
	m.tokens = min(m.burst, m.tokens+now.Sub(m.last).Seconds()*m.rate)
	m.last = now
	if m.tokens < 1 {
		return false
	}
	m.tokens--
	return true
}
