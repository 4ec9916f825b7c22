package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// A session holds holds of every kind (store.HoldKind), in one hash keyed
// by "kind:name" (codec.go): the session scripts only keep entries and
// reports, and what a session does to a hold (renew or check it to the
// session's deadline, drop it at close) is one script of every kind
// (refreshHold, dropHold in holds.go). Binding, unbinding and marking a
// hold gone are steps of their own (bindHold, confirmHold, unbindHold,
// holdGone).

// sessionCreateArgs are lua/session_create.lua's: the ttl and the grace
// µs (how long an expired session is remembered), Indexed "1" if the
// session is in its namespace's index (session_index.lua), and the
// session's lock-delay µs (0: none).
type sessionCreateArgs struct {
	TTL     int64  `lua:"ttl,int"`
	Grace   int64  `lua:"grace,int"`
	Indexed string `lua:"indexed"`
	Delay   int64  `lua:"delay,int"`
}

// sessionRefreshArgs are lua/session_refresh.lua's: Mode "renew", "check"
// or "resume" (renew on a new stream: the stream epoch goes up by one);
// the new ttl µs (0: keep the current one); the grace µs; the caller's
// stream epoch (0: none); Ack, the highest report seq acknowledged (the
// reports up to it are forgotten); the session's wake-up channel (a resume
// wakes the old stream).
type sessionRefreshArgs struct {
	Mode    string `lua:"mode"`
	TTL     int64  `lua:"ttl,int"`
	Grace   int64  `lua:"grace,int"`
	Stream  uint64 `lua:"stream,int"`
	Ack     uint64 `lua:"ack,int"`
	Channel string `lua:"channel"`
}

// sessionAddHoldArgs are lua/session_add_hold.lua's: the hold's field
// ("kind:name"), its pending entry, the grace µs, and the most holds the
// session may have, of every kind, unacknowledged reports included (0: no
// cap).
type sessionAddHoldArgs struct {
	Field string `lua:"field"`
	Entry string `lua:"entry"`
	Grace int64  `lua:"grace,int"`
	Max   int    `lua:"max,int"`
}

// sessionConfirmHoldArgs are lua/session_confirm_hold.lua's: the hold's
// field, the binding's token, the confirmed entry and the session's
// wake-up channel (its stream learns of the hold).
type sessionConfirmHoldArgs struct {
	Field     string `lua:"field"`
	Token     string `lua:"tok"`
	Entry     string `lua:"entry"`
	Channel   string `lua:"channel"`
	Horizon   int64  `lua:"horizon,int"`   // µs its keys last until (the grant's holdKeep)
	HoldUntil int64  `lua:"holdUntil,int"` // its max hold µs (0: none)
}

// sessionHoldsKeptArgs are lua/session_holds_kept.lua's: the set's version
// the heartbeat read, the horizon its holds' keys were renewed to (0: none
// renewed) and the next max hold or pending binding's end to look at (0:
// none).
type sessionHoldsKeptArgs struct {
	Seen    string `lua:"seen"`
	Horizon int64  `lua:"horizon,int"`
	NextAt  int64  `lua:"nl,int"`
}

// sessionMarkLostArgs are lua/session_mark_lost.lua's: the session's
// wake-up channel, published to if a report was made ("": none; the
// session's own stream is the caller), and triples of field ("kind:name"),
// token and reason (store.LostMaxHold or store.LostGone).
type sessionMarkLostArgs struct {
	Channel string   `lua:"channel"`
	Triples []string `lua:"triples,rest"`
}

// sessionCloseArgs are lua/session_close.lua's: Mode "begin" or "finish",
// the grace µs and the caller's stream epoch (0: none).
type sessionCloseArgs struct {
	Mode   string `lua:"mode"`
	Grace  int64  `lua:"grace,int"`
	Stream uint64 `lua:"stream,int"`
}

// sessionIndexArgs are lua/session_index.lua's, on kIndex, a namespace's
// index of live sessions (sorted set: score = a time µs the session is
// live no later than: its deadline when admitted, then, as refreshes touch
// it, up to 3 ttl past its deadline: session_refresh.lua). Mode "admit"
// (IDs[0] with Score, its ttl µs, if fewer than Cap are live; Cap 0: no
// cap), "touch" (IDs[0] gets Score) or "remove" (IDs leave).
type sessionIndexArgs struct {
	Mode  string   `lua:"mode"`
	Score int64    `lua:"score,int"`
	Cap   int      `lua:"max,int"`
	IDs   []string `lua:"ids,rest"`
}

// sessionHold is one of a session's holds, as its set keeps it.
type sessionHold struct {
	kind store.HoldKind
	name string
	sessionEntry
}

func (h sessionHold) field() string { return holdField(h.kind, h.name) }

// CreateSession implements store.Sessions: with a cap, the namespace's
// index admits the session (or finds the namespace full); then the session
// is created. A crash between the two leaves an index entry that ends at the
// session's deadline.
func (s *Store) CreateSession(ctx context.Context, id string, ttl time.Duration, max int, lockDelay time.Duration) (store.SessionState, error) {
	var st store.SessionState
	err := s.do(ctx, "CreateSession", s.keys.session(id)[0], func(ctx context.Context) error {
		if s.memoryHigh(ctx, s.keys.session(id)[0]) {
			return store.ErrMemoryHigh
		}
		indexed := ""
		if max > 0 {
			if err := s.admitSession(ctx, id, ttl, max); err != nil {
				return err
			}
			indexed = "1"
		}
		dl, now, err := decodeCreate(s.eval(ctx, sessionCreate, s.keys.session(id), sessionCreateArgs{
			TTL: ttl.Microseconds(), Grace: store.SessionGrace.Microseconds(), Indexed: indexed, Delay: lockDelay.Microseconds(),
		}))
		if err != nil {
			return err
		}
		st = store.SessionState{ID: id, Stream: 1, TTL: micros(dl - now), ExpireTime: unixMicro(dl)}
		return nil
	})
	return st, err
}

// admitSession admits session id to its namespace's index, which holds
// at most max sessions. A full index names its sessions with the lowest
// scores, which may have ended since a refresh last touched them (a touch
// is rare: session_refresh.lua): those found ended are removed and the
// session is admitted if that made room. store.ErrTooManySessions if not.
func (s *Store) admitSession(ctx context.Context, id string, ttl time.Duration, max int) error {
	idx := []string{s.keys.sessionIndex(store.Namespace(id))}
	admit := func() ([]string, error) {
		return decodeIndex(s.eval(ctx, sessionIndex, idx, sessionIndexArgs{"admit", ttl.Microseconds(), max, []string{id}}))
	}
	full, err := admit()
	if err != nil || full == nil {
		return err
	}
	calls := make([]call, len(full))
	for i, other := range full {
		calls[i] = call{sessionDeadline, s.keys.session(other), noArgs{}}
	}
	var ended []string
	for i, cmd := range s.evalPipelined(ctx, calls) {
		r, err := replyOf(sessionDeadline, cmd)
		if err != nil {
			return err
		}
		if r.code(codeOK, codeSessionGone) == codeSessionGone {
			ended = append(ended, full[i])
		}
		if err := r.done(); err != nil {
			return err
		}
	}
	if len(ended) == 0 {
		return store.ErrTooManySessions
	}
	if _, err := decodeIndex(s.eval(ctx, sessionIndex, idx, sessionIndexArgs{Mode: "remove", IDs: ended})); err != nil {
		return err
	}
	if full, err = admit(); err != nil || full == nil {
		return err
	}
	return store.ErrTooManySessions
}

// decodeIndex reads session_index.lua's reply: OK (nil), or, for an admit
// to a full index, the IDs it names (never empty: a full index has one).
func decodeIndex(cmd *redis.Cmd) ([]string, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	if n, ok := v.(int64); ok && n == codeOK {
		return nil, nil
	}
	r, err := replyOf(sessionIndex, cmd)
	if err != nil {
		return nil, err
	}
	r.code(codeNo)
	ids := make([]string, 0, r.len()-1)
	for i := 1; i < r.len(); i++ {
		ids = append(ids, r.str(i))
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: %s replied a full index without its sessions", errCorrupt, sessionIndex.name)
	}
	return ids, nil
}

// decodeCreate reads session_create.lua's reply: the deadline and now.
func decodeCreate(cmd *redis.Cmd) (deadline, now int64, err error) {
	r, err := replyOf(sessionCreate, cmd)
	if err != nil {
		return 0, 0, err
	}
	r.code(codeOK)
	deadline, now = r.int(1), r.int(2)
	return deadline, now, r.done()
}

// ResumeSession implements store.Sessions.
func (s *Store) ResumeSession(ctx context.Context, id string, ttl time.Duration) (store.SessionState, error) {
	return s.refreshSession(ctx, "ResumeSession", store.SessionRef{ID: id}, ttl, "resume")
}

// KeepAliveSession implements store.Sessions: one script forgets the
// acknowledged reports, renews the session and lists its reports. Its
// holds live by it (hold_prelude.lua's resolve), so they are looked at only
// when due (session_refresh.lua): as their keys' horizon nears, or a max
// hold or a pending binding's end has come. Then one pipeline (a round
// trip per node) extends every confirmed hold and its keys' horizon and
// checks every pending one; one more script notes the new horizon
// (session_holds_kept.lua); and, if any hold was lost, one more turns the
// lost ones into reports. The namespace's index is touched now and then.
func (s *Store) KeepAliveSession(ctx context.Context, ref store.SessionRef, ttl time.Duration) (store.SessionState, error) {
	return s.refreshSession(withLinger(ctx), "KeepAliveSession", ref, ttl, "renew")
}

// CheckSession implements store.Sessions.
func (s *Store) CheckSession(ctx context.Context, ref store.SessionRef) (store.SessionState, error) {
	return s.refreshSession(ctx, "CheckSession", ref, 0, "check")
}

// refreshed is session_refresh.lua's reply.
type refreshed struct {
	code          int64 // codeOK live, codeExpired, codeSessionGone, codeClosing, codeSuperseded
	deadline, now int64
	touch         int64 // the session's new score in its namespace's index; 0: none
	stream        uint64
	nextAt        int64            // the next max hold or pending binding's end to look at (0: none)
	ttl           time.Duration    // the session's ttl
	version       string           // the hold set's version (session_holds_kept.lua)
	due           bool             // holds lists the session's holds, to be looked at
	reports       []store.LostHold // by Seq
	holds         []sessionHold
}

func decodeRefresh(cmd *redis.Cmd) (refreshed, error) {
	var out refreshed
	r, err := replyOf(sessionRefresh, cmd)
	if err != nil {
		return out, err
	}
	out.code = r.code(codeOK, codeExpired, codeSessionGone, codeClosing, codeSuperseded)
	if out.code != codeOK && out.code != codeExpired {
		return out, r.done()
	}
	out.deadline, out.now, out.stream = r.int(1), r.int(2), r.uint(4)
	if t := r.str(3); t != "" {
		if out.touch, err = strconv.ParseInt(t, 10, 64); err != nil || out.touch <= 0 {
			return out, fmt.Errorf("%w: %s's reply: index score %q", errCorrupt, sessionRefresh.name, t)
		}
	}
	out.nextAt, out.ttl, out.version, out.due = r.int(5), micros(r.int(6)), r.str(7), r.int(8) == 1
	const first = 10 // the first report's seq
	n := r.int(first - 1)
	if err := r.done(); err != nil {
		return out, err
	}
	if n < 0 || n > int64(r.len()) || int64(r.len()) < first+2*n {
		return out, fmt.Errorf("%w: %s's reply: %d reports in %d values", errCorrupt, sessionRefresh.name, n, r.len())
	}
	end := first + 2*int(n)
	for i := first; i < end; i += 2 {
		seq, rec := r.str(i), r.str(i+1)
		if err := r.done(); err != nil {
			return out, err
		}
		l, err := decodeReport(seq, rec)
		if err != nil {
			return out, err
		}
		out.reports = append(out.reports, l)
	}
	sort.Slice(out.reports, func(i, j int) bool { return out.reports[i].Seq < out.reports[j].Seq })
	out.holds, err = decodeHolds(r, end)
	return out, err
}

func (s *Store) refreshSession(ctx context.Context, op string, ref store.SessionRef, ttl time.Duration, mode string) (store.SessionState, error) {
	var st store.SessionState
	id := ref.ID
	err := s.do(ctx, op, s.keys.session(id)[0], func(ctx context.Context) error {
		sk := s.keys.session(id)
		rs, err := decodeRefresh(s.eval(ctx, sessionRefresh, sk, sessionRefreshArgs{
			Mode: mode, TTL: ttl.Microseconds(), Grace: store.SessionGrace.Microseconds(), Stream: ref.Stream, Ack: ref.Ack,
			Channel: s.keys.channel(store.SessionTopic(id)),
		}))
		if err != nil {
			return err
		}
		switch rs.code {
		case codeSuperseded:
			return store.ErrSuperseded
		case codeClosing:
			// A close began and was cut short: finish it, so that its holds
			// go now rather than at their deadline.
			if _, err := s.closeSession(ctx, store.SessionRef{ID: id}); err != nil && !errors.Is(err, store.ErrSessionNotFound) {
				return err
			}
			return store.ErrSessionNotFound
		case codeSessionGone:
			return store.ErrSessionNotFound
		}
		dl, now := rs.deadline, rs.now
		st = store.SessionState{ID: id, Stream: rs.stream, ExpireTime: unixMicro(dl), Lost: rs.reports}
		if rs.code == codeExpired {
			st.Expired = true
			// The holds that ended with the session go now (their
			// lock-delays, an election's "no leader", whom they let in),
			// not at the next call on each name. Best effort: that call
			// would do the same.
			calls := make([]call, len(rs.holds))
			for i, h := range rs.holds {
				calls[i] = s.expireHold(h.kind, h.name, h.token, dl)
			}
			if len(calls) > 0 {
				s.evalPipelined(ctx, calls)
			}
			return nil
		}
		st.TTL = micros(dl - now)
		if rs.nextAt > 0 && rs.nextAt < dl {
			st.NextLoss = unixMicro(rs.nextAt)
		}
		keep := holdKeep(rs.ttl)
		calls := make([]call, len(rs.holds), len(rs.holds)+2)
		for i, h := range rs.holds {
			// A binding not yet confirmed is checked, never renewed; a
			// confirmed one is renewed, also by a check (to the deadline
			// the session has: it lives by it).
			calls[i] = s.refreshHold(h.kind, h.name, h.token, dl, !h.pending, keep)
		}
		if rs.touch > 0 {
			calls = append(calls, call{sessionIndex, []string{s.keys.sessionIndex(store.Namespace(id))}, sessionIndexArgs{"touch", rs.touch, 0, []string{id}}})
		}
		if !rs.due {
			if len(calls) > 0 {
				s.evalPipelined(ctx, calls) // bookkeeping for a cap: its failure must not fail the keepalive
			}
			return nil
		}
		// The index is bookkeeping for a cap: its failure must not fail the
		// keepalive; the holds' must (their outcome is unknown).
		cmds := s.evalPipelined(ctx, calls)[:len(rs.holds)]
		var mark []string
		var lost []store.LostHold
		next := int64(0) // the next max hold or pending binding's end among the holds kept
		later := func(t int64) {
			if t > 0 && (next == 0 || t < next) {
				next = t
			}
		}
		for i, c := range cmds {
			h := rs.holds[i]
			live, _, at, err := decodeHoldSession(c, false)
			if err != nil {
				return err
			}
			if live {
				switch {
				case h.pending:
					later(now + rs.ttl.Microseconds()) // looked at again until confirmed or gone
				case h.holdUntil != 0:
					later(h.holdUntil)
				}
				if !h.pending && h.holdUntil != 0 && h.holdUntil < dl {
					if u := unixMicro(h.holdUntil); st.NextLoss.IsZero() || u.Before(st.NextLoss) {
						st.NextLoss = u
					}
				}
				continue
			}
			// The hold was found not live at its node's time at, which may
			// be later than the session's now (the calls run one after the
			// other, on other nodes in a cluster): a max hold, or the
			// session's deadline, that passed in between ended it, as the
			// memory store (one clock, one step) would report it; only a
			// hold that ended before either is gone.
			reason := store.LostGone
			switch end := max(now, at); {
			case h.holdUntil != 0 && end >= h.holdUntil && h.holdUntil <= dl:
				reason = store.LostMaxHold
			case end >= dl:
				reason = store.LostSessionExpired
			}
			lost = append(lost, store.LostHold{Kind: h.kind, Name: h.name, Fence: h.fence, Reason: reason})
			mark = append(mark, h.field(), h.token, strconv.Itoa(int(reason)))
		}
		horizon := int64(0)
		if mode != "check" {
			horizon = dl + keep.Microseconds()
		}
		if _, err := codeOf(sessionHoldsKept, s.eval(ctx, sessionHoldsKept, sk[:1], sessionHoldsKeptArgs{rs.version, horizon, next}), codeOK, codeNo); err != nil {
			return err
		}
		if len(mark) == 0 {
			return nil
		}
		// Only what this call took out of the set is lost: a hold released
		// by its token meanwhile left the set itself.
		seqs, err := decodeMarked(s.eval(ctx, sessionMarkLost, sk, sessionMarkLostArgs{Triples: mark}), len(lost))
		if err != nil {
			return err
		}
		for i, seq := range seqs {
			if seq > 0 {
				l := lost[i]
				l.Seq = seq
				st.Lost = append(st.Lost, l)
			}
		}
		return nil
	})
	return st, err
}

// decodeMarked reads session_mark_lost.lua's reply to n triples: each
// report's seq, 0 where it made none.
func decodeMarked(cmd *redis.Cmd, n int) ([]uint64, error) {
	r, err := replyOf(sessionMarkLost, cmd)
	if err != nil {
		return nil, err
	}
	if r.len() != n {
		return nil, fmt.Errorf("%w: %s replied %d values for %d holds", errCorrupt, sessionMarkLost.name, r.len(), n)
	}
	seqs := make([]uint64, n)
	for i := range seqs {
		seqs[i] = r.uint(i)
	}
	return seqs, r.done()
}

// CloseSession implements store.Sessions, in steps that a retry can finish
// if one fails: the session is marked closing (no keepalive or new hold
// from then on) and lists its holds; one pipeline deletes those it still
// has and wakes their waiters; then the session is deleted.
func (s *Store) CloseSession(ctx context.Context, ref store.SessionRef) ([]store.ReleasedHold, error) {
	var released []store.ReleasedHold
	err := s.do(ctx, "CloseSession", s.keys.session(ref.ID)[0], func(ctx context.Context) error {
		var err error
		released, err = s.closeSession(ctx, ref)
		return err
	})
	return released, err
}

// closeSession is CloseSession's work, also used to finish a close that was
// cut short.
func (s *Store) closeSession(ctx context.Context, ref store.SessionRef) ([]store.ReleasedHold, error) {
	id := ref.ID
	sk := s.keys.session(id)
	c, err := decodeClose(s.eval(ctx, sessionClose, sk, sessionCloseArgs{"begin", store.SessionGrace.Microseconds(), ref.Stream}), true)
	if err != nil || !c.closing {
		return nil, err // unknown, superseded, or expired: nothing to release
	}
	calls := make([]call, len(c.holds), len(c.holds)+1)
	for i, h := range c.holds {
		calls[i] = s.dropHold(h.kind, h.name, h.token)
	}
	if c.indexed {
		calls = append(calls, call{sessionIndex, []string{s.keys.sessionIndex(store.Namespace(id))}, sessionIndexArgs{Mode: "remove", IDs: []string{id}}})
	}
	var released []store.ReleasedHold
	for i, cmd := range s.evalPipelined(ctx, calls)[:len(c.holds)] {
		h := c.holds[i]
		live, held, _, err := decodeHoldSession(cmd, true)
		if err != nil {
			return nil, err // the session stays closing; a retry finishes it
		}
		if live {
			released = append(released, store.ReleasedHold{Kind: h.kind, Name: h.name, Held: held})
		}
	}
	_, err = decodeClose(s.eval(ctx, sessionClose, sk, sessionCloseArgs{Mode: "finish"}), false)
	return released, err // released even if the finish failed: they are gone
}

// closed is session_close.lua's reply.
type closed struct {
	closing bool // false: it had expired, and was forgotten
	indexed bool
	holds   []sessionHold
}

// decodeClose reads session_close.lua's reply to "begin" (begin true) or
// "finish". An unknown session is store.ErrSessionNotFound, a superseded
// stream store.ErrSuperseded.
func decodeClose(cmd *redis.Cmd, begin bool) (closed, error) {
	r, err := replyOf(sessionClose, cmd)
	if err != nil {
		return closed{}, err
	}
	if !begin {
		r.code(codeOK)
		return closed{}, r.done()
	}
	switch r.code(codeOK, codeSessionGone, codeSuperseded, codeExpired) {
	case codeSessionGone:
		return closed{}, store.ErrSessionNotFound
	case codeSuperseded:
		return closed{}, store.ErrSuperseded
	case codeExpired:
		return closed{}, nil
	case codeBad:
		return closed{}, r.done()
	}
	c := closed{closing: true, indexed: r.str(1) == "1"}
	if err := r.done(); err != nil {
		return closed{}, err
	}
	c.holds, err = decodeHolds(r, 2)
	return c, err
}

// decodeHolds reads the field, entry pairs of a session's holds from
// value from of a reply to its end. A hold of a kind with no holdKind is
// errCorrupt: nothing could renew or drop it.
func decodeHolds(r *reply, from int) ([]sessionHold, error) {
	if (r.len()-from)%2 != 0 {
		return nil, fmt.Errorf("%w: %s's reply: %d values for field, entry pairs", errCorrupt, r.script, r.len()-from)
	}
	holds := make([]sessionHold, 0, (r.len()-from)/2)
	for i := from; i+1 < r.len(); i += 2 {
		field, rec := r.str(i), r.str(i+1)
		if err := r.done(); err != nil {
			return nil, err
		}
		kind, name, err := splitHoldField(field)
		if err != nil {
			return nil, err
		}
		if _, ok := holdTags[kind]; !ok {
			return nil, fmt.Errorf("%w: a session holds a hold of unknown kind %q", errCorrupt, kind)
		}
		e, err := decodeEntry(rec)
		if err != nil {
			return nil, err
		}
		holds = append(holds, sessionHold{kind: kind, name: name, sessionEntry: e})
	}
	return holds, nil
}

// sessionCap reads live session id's deadline, how many places of its
// cap are taken, its lock-delay and its ttl (µs); store.ErrSessionNotFound
// if it is not live.
func (s *Store) sessionCap(ctx context.Context, id string) (deadline, taken, lockDelay, ttl int64, err error) {
	r, err := replyOf(sessionDeadline, s.eval(ctx, sessionDeadline, s.keys.session(id), noArgs{}))
	if err != nil {
		return 0, 0, 0, 0, err
	}
	switch r.code(codeOK, codeSessionGone) {
	case codeSessionGone:
		return 0, 0, 0, 0, store.ErrSessionNotFound
	case codeBad:
		return 0, 0, 0, 0, r.done()
	}
	deadline, taken, lockDelay, ttl = r.int(1), r.int(2), r.int(3), r.int(4)
	return deadline, taken, lockDelay, ttl, r.done()
}

// bindHold adds h to session id's holds as a pending binding, unless the
// session already has max holds (0: no cap), and returns the session's
// deadline. store.ErrSessionNotFound: it is not live; store.ErrTooManyHolds:
// it is full. replicated is evalReplicated's.
func (s *Store) bindHold(ctx context.Context, id string, h sessionHold, max int) (deadline int64, replicated bool, err error) {
	cmd, replicated := s.evalReplicated(ctx, sessionAddHold, s.keys.session(id), sessionAddHoldArgs{
		Field: h.field(), Entry: encodeEntry(h.sessionEntry), Grace: store.SessionGrace.Microseconds(), Max: max,
	})
	r, err := replyOf(sessionAddHold, cmd)
	if err != nil {
		return 0, replicated, err
	}
	switch r.code(codeOK, codeSessionGone, codeFull) {
	case codeSessionGone:
		return 0, replicated, store.ErrSessionNotFound
	case codeFull:
		return 0, replicated, store.ErrTooManyHolds
	}
	deadline = r.int(1)
	return deadline, replicated, r.done()
}

// confirmHold confirms h's pending binding to session id (h.pending is
// false), whose keys last until horizon (µs), and wakes the session's
// stream; it returns the session's deadline. store.ErrSessionNotFound: the
// session is not live, or the entry is no longer the binding's.
func (s *Store) confirmHold(ctx context.Context, id string, h sessionHold, horizon int64) (deadline int64, replicated bool, err error) {
	cmd, replicated := s.evalReplicated(ctx, sessionConfirmHold, s.keys.session(id)[:2], sessionConfirmHoldArgs{
		Field: h.field(), Token: h.token, Entry: encodeEntry(h.sessionEntry), Channel: s.keys.channel(store.SessionTopic(id)),
		Horizon: horizon, HoldUntil: h.holdUntil,
	})
	r, err := replyOf(sessionConfirmHold, cmd)
	if err != nil {
		return 0, replicated, err
	}
	switch r.code(codeOK, codeSessionGone, codeNo) {
	case codeSessionGone, codeNo:
		return 0, replicated, store.ErrSessionNotFound
	}
	deadline = r.int(1)
	return deadline, replicated, r.done()
}

// unbindHold takes a hold out of session id's set if token still has it
// (a hold being released, or lost on its way in), and answers what the
// session said of it then, as session_vouch.lua: whether the holder lived,
// and the session's deadline.
func (s *Store) unbindHold(ctx context.Context, id string, kind store.HoldKind, name, token string) (live bool, deadline int64, err error) {
	return decodeVouch(s.eval(ctx, sessionVouch, s.keys.session(id)[:2], sessionVouchArgs{holdField(kind, name), token, true}))
}

// holdGone turns a hold of session id that token no longer has into a loss
// report (LostGone), if the session still lists it, and wakes the
// session's stream.
func (s *Store) holdGone(ctx context.Context, id string, kind store.HoldKind, name, token string) error {
	_, err := decodeMarked(s.eval(ctx, sessionMarkLost, s.keys.session(id), sessionMarkLostArgs{
		Channel: s.keys.channel(store.SessionTopic(id)), Triples: []string{holdField(kind, name), token, strconv.Itoa(int(store.LostGone))},
	}), 1)
	return err
}
