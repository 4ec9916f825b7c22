package redis

import (
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// A script answers with a Lua table, which go-redis gives as []any of int64
// and string. Each script's reply is decoded by one function next to its
// call, through a reply, so that a short or mistyped reply (a script and
// its caller out of step: a bug) is errCorrupt naming the script and the
// field, which the server logs and answers Internal, never a panic and
// never a silent zero.

// Reply codes: the first value of most replies. lua/prelude.lua gives the
// same numbers the same names (TestReplyCodesMatchThePrelude).
const (
	codeNo           = 0  // not done: not held, held by another, not found
	codeOK           = 1  // done: granted, renewed, released, live
	codeSessionGone  = -1 // the session is not live (unknown, ended, expired)
	codeAlreadyHeld  = -2 // the asking session holds it already
	codeFull         = -3 // the session holds as many as it may
	codeSessionBound = -4 // bound to a session: renewed by it, not by token
	codeClosing      = -5 // a close of the session began and did not finish
	codeSuperseded   = -6 // the caller's stream no longer drives the session
	codeExpired      = -7 // the session expired (and is reported so)
	codeMismatch     = -8 // an idempotency key held with another fingerprint
	codeDuplicate    = 3  // an enqueue found the message its dedup ID names
	codeDead         = 4  // a nacked message had its last attempt: dead
	codeReplaced     = 5  // an enqueue replaced the message its dedup ID names

	codeLimitMismatch  = -9  // a semaphore's limit is another
	codeTooManyWaiters = -10 // a name's queue is full
	codeNotLeader      = -11 // the token does not lead the election
	codeQueueFull      = -12 // the queue holds as many messages as it may
	codeMemoryHigh     = -13 // the node is past its memory high-water mark
	codeAsk            = -14 // a hold script needs the sessions of holders it names (holdEval)
	codeSlow           = -15 // a solo script cannot decide: the full script must (soloFirst)
)

// replyCodes names the codes as the prelude does.
var replyCodes = map[string]int64{
	"NO": codeNo, "OK": codeOK, "SESSION_GONE": codeSessionGone, "ALREADY_HELD": codeAlreadyHeld,
	"FULL": codeFull, "SESSION_BOUND": codeSessionBound, "CLOSING": codeClosing,
	"SUPERSEDED": codeSuperseded, "EXPIRED": codeExpired,
	"MISMATCH": codeMismatch, "DUPLICATE": codeDuplicate, "DEAD": codeDead, "REPLACED": codeReplaced,
	"LIMIT_MISMATCH": codeLimitMismatch, "TOO_MANY_WAITERS": codeTooManyWaiters, "NOT_LEADER": codeNotLeader,
	"QUEUE_FULL": codeQueueFull, "MEMORY_HIGH": codeMemoryHigh, "ASK": codeAsk, "SLOW": codeSlow,
}

// reply reads one array reply field by field. The first field that is
// missing or of the wrong type sets err; reads after it return zeros, and
// the decoder returns err.
type reply struct {
	script string
	v      []any
	err    error
}

// replyOf takes cmd's reply to sc. A failed command's error is returned as
// it is (an outage, or Redis refusing the script), but for the script's own
// CORRUPT error (lua/prelude.lua's corrupt: a stored record it cannot
// read), which is errCorrupt; a reply that is not an array is errCorrupt.
func replyOf(sc *script, cmd *redis.Cmd) (*reply, error) {
	v, err := result(sc, cmd)
	if err != nil {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s replied %T, want an array", errCorrupt, sc.name, v)
	}
	return &reply{script: sc.name, v: a}, nil
}

// intOf takes cmd's reply to sc, a single integer.
func intOf(sc *script, cmd *redis.Cmd) (int64, error) {
	v, err := result(sc, cmd)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: %s replied %T, want an integer", errCorrupt, sc.name, v)
	}
	return n, nil
}

// result is cmd's value, or its error, a CORRUPT one as errCorrupt.
func result(sc *script, cmd *redis.Cmd) (any, error) {
	v, err := cmd.Result()
	if redis.HasErrorPrefix(err, "CORRUPT ") {
		return nil, fmt.Errorf("%w: %s: %v", errCorrupt, sc.name, err)
	}
	return v, err
}

// codeOf takes cmd's reply to sc, a single reply code, one of want.
func codeOf(sc *script, cmd *redis.Cmd, want ...int64) (int64, error) {
	c, err := intOf(sc, cmd)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(want, c) {
		return 0, fmt.Errorf("%w: %s replied code %d, want one of %v", errCorrupt, sc.name, c, want)
	}
	return c, nil
}

func (r *reply) fail(i int, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s's reply, value %d of %d: %s", errCorrupt, r.script, i+1, len(r.v), fmt.Sprintf(format, args...))
	}
}

// len is the number of values.
func (r *reply) len() int { return len(r.v) }

// need checks that there are at least n values.
func (r *reply) need(n int) bool {
	if len(r.v) < n {
		r.fail(len(r.v), "short: want %d values", n)
		return false
	}
	return true
}

// int reads value i, an integer.
func (r *reply) int(i int) int64 {
	if !r.need(i + 1) {
		return 0
	}
	n, ok := r.v[i].(int64)
	if !ok {
		r.fail(i, "%T, want an integer", r.v[i])
	}
	return n
}

// uint reads value i, a non-negative integer (a fence, a sequence number).
func (r *reply) uint(i int) uint64 {
	n := r.int(i)
	if n < 0 {
		r.fail(i, "%d, want a non-negative integer", n)
		return 0
	}
	return uint64(n)
}

// str reads value i, a string.
func (r *reply) str(i int) string {
	if !r.need(i + 1) {
		return ""
	}
	s, ok := r.v[i].(string)
	if !ok {
		r.fail(i, "%T, want a string", r.v[i])
	}
	return s
}

// code reads value 0, a reply code, and checks that it is one of want.
func (r *reply) code(want ...int64) int64 { return r.codeAt(0, want...) }

// codeAt reads value i, a reply code, and checks that it is one of want.
// A missing or mistyped code is codeBad too, never the zero of codeNo.
func (r *reply) codeAt(i int, want ...int64) int64 {
	if !r.need(i + 1) {
		return codeBad
	}
	c, ok := r.v[i].(int64)
	if !ok {
		r.fail(i, "%T, want a reply code", r.v[i])
		return codeBad
	}
	if !slices.Contains(want, c) {
		r.fail(i, "code %d, want one of %v", c, want)
		return codeBad
	}
	return c
}

// codeBad is what code returns for a code it does not expect: no case of a
// decoder's switch matches it, and done reports the error.
const codeBad = -1 << 32

// done is the decoder's last word: err if any value was wrong.
func (r *reply) done() error { return r.err }
