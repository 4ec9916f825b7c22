package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
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
	// MaxSessions caps the sessions this instance opens: a KeepAlive stream
	// that would open a new session while this many streams are open here
	// is refused with OVERLOADED and a retry_after. Heartbeats and resumes
	// of sessions that exist are never refused by it: overload refuses new
	// work, never a live session's. In the configuration 0 means derived
	// from the memory coordd may use (cmd/coordd: DerivedMaxSessions) and
	// -1 no limit; the server takes 0 or less as no limit.
	MaxSessions int `mapstructure:"max_sessions"`
	// ShedStoreLatency sheds new work (a new session, a call that would
	// wait, an Observe stream) with OVERLOADED while the store's average
	// latency is above it (StoreLatency); 0: never.
	ShedStoreLatency time.Duration `mapstructure:"shed_store_latency"`
}

// SessionBytes is what one open session costs this instance, rounded up
// (measured: the idle-session footprint in bench/results), the unit of
// DerivedMaxSessions.
const SessionBytes = 64 << 10

// DerivedMaxSessions is limits.max_sessions when it is 0: as many
// sessions as half of budget (the memory coordd may use) holds at
// SessionBytes each, at least 1000.
func DerivedMaxSessions(budget int64) int {
	return int(max(budget/2/SessionBytes, 1000))
}

// overloadRetryAfter is the retry_after of an OVERLOADED refusal: a
// client waits about this long, with jitter, before it tries again.
const overloadRetryAfter = time.Second

// errOverloaded refuses new work that would overload this instance
// (reason names the bound, in the message only): RESOURCE_EXHAUSTED,
// reason OVERLOADED, with retry_after in the ErrorInfo's metadata (as a
// decimal seconds with an "s", as protobuf's JSON writes a Duration and
// Go's time.ParseDuration reads it: "1s") and in a google.rpc.RetryInfo.
func errOverloaded(what string) error {
	return withDetails(codes.ResourceExhausted, "coordd is at capacity: "+what+"; retry after retry_after, or on another instance",
		"OVERLOADED", map[string]string{"retry_after": strconv.FormatFloat(overloadRetryAfter.Seconds(), 'f', -1, 64) + "s"},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(overloadRetryAfter)})
}

// gate counts calls in progress per namespace and per connection, and
// refuses those over the limits.
//
// A connection is known by its peer's address (a TCP connection's
// ip:port, unique among live connections): its counts live in conns from
// its first waiting call or stream to its last one's end, and an entry
// back at zero is dropped, so nothing needs to hear that a connection
// closed. (A stats.Handler would hear it, but costs every RPC a copy of
// its metadata in grpc-go.)
type gate struct {
	limits Limits
	mu     sync.Mutex
	counts map[gateKey]int
	conns  map[gateKey]int // by peer address (gateKey.ns) and kind
}

type gateKey struct {
	ns     string
	stream bool // a KeepAlive stream, else a waiting call
}

// enter admits one waiting call (stream false) or KeepAlive stream (stream
// true) of namespace ns on the connection of ctx, or refuses it; admitted,
// it must be left with the returned func.
func (g *gate) enter(ctx context.Context, ns string, stream bool) (func(), error) {
	nsMax, connMax, reason := g.limits.MaxWaitersPerNamespace, g.limits.MaxWaitersPerConnection, "TOO_MANY_WAITERS"
	if stream {
		nsMax, connMax, reason = g.limits.MaxStreamsPerNamespace, g.limits.MaxStreamsPerConnection, "TOO_MANY_STREAMS"
	}
	k := gateKey{ns, stream}
	var ck gateKey // the connection's, if counted
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil && connMax > 0 {
		ck = gateKey{p.Addr.String(), stream}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if ck.ns != "" && g.conns[ck] >= connMax {
		return nil, withDetails(codes.ResourceExhausted, "too many calls waiting or streams open on this connection", reason, nil)
	}
	if nsMax > 0 && g.counts[k] >= nsMax {
		return nil, withDetails(codes.ResourceExhausted, "too many calls waiting or streams open in this namespace", reason, nil)
	}
	g.counts[k]++
	if ck.ns != "" {
		g.conns[ck]++
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.counts[k]--; g.counts[k] == 0 {
			delete(g.counts, k)
		}
		if ck.ns != "" {
			if g.conns[ck]--; g.conns[ck] == 0 {
				delete(g.conns, ck)
			}
		}
	}, nil
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
