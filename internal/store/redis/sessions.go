package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// CreateSession implements store.Sessions: with a cap, the namespace's
// index admits the session (or finds the namespace full); then the session
// is created. A crash between the two leaves an index entry that ends at the
// session's deadline.
func (s *Store) CreateSession(ctx context.Context, id string, ttl time.Duration, max int) (store.SessionState, error) {
	var st store.SessionState
	err := s.do(ctx, "CreateSession", s.keys.session(id)[0], func(ctx context.Context) error {
		indexed := ""
		if max > 0 {
			admitted, err := s.eval(ctx, sessionIndex, []string{s.keys.sessionIndex(store.Namespace(id))},
				"admit", id, ttl.Microseconds(), max).Int64()
			if err != nil {
				return err
			}
			if admitted == 0 {
				return store.ErrTooManySessions
			}
			indexed = "1"
		}
		r, err := s.eval(ctx, sessionCreate, s.keys.session(id), ttl.Microseconds(), store.SessionGrace.Microseconds(), indexed).Slice()
		if err != nil {
			return err
		}
		dl, now := toInt(r[0]), toInt(r[1])
		st = store.SessionState{ID: id, Stream: 1, TTL: micros(dl - now), ExpireTime: unixMicro(dl)}
		return nil
	})
	return st, err
}

// ResumeSession implements store.Sessions.
func (s *Store) ResumeSession(ctx context.Context, id string, ttl time.Duration) (store.SessionState, error) {
	return s.refreshSession(ctx, "ResumeSession", store.SessionRef{ID: id}, ttl, "resume")
}

// KeepAliveSession implements store.Sessions: one script forgets the
// acknowledged reports, renews the session and lists its locks and
// reports; then one pipeline (a round trip per node) extends every
// confirmed lock and checks every pending one (and touches the namespace's
// index); and, if any lock was lost, one more script turns the lost ones
// into reports.
func (s *Store) KeepAliveSession(ctx context.Context, ref store.SessionRef, ttl time.Duration) (store.SessionState, error) {
	return s.refreshSession(ctx, "KeepAliveSession", ref, ttl, "renew")
}

// CheckSession implements store.Sessions.
func (s *Store) CheckSession(ctx context.Context, ref store.SessionRef) (store.SessionState, error) {
	return s.refreshSession(ctx, "CheckSession", ref, 0, "check")
}

// refreshed is session_refresh.lua's reply.
type refreshed struct {
	code          int64 // -1 unknown, -2 closing, -3 superseded, 0 expired, 1 live
	deadline, now int64
	indexed       bool
	stream        uint64
	reports       []store.LostLock // by Seq
	names         []string
	entries       []sessionEntry
}

func decodeRefresh(r []any) (refreshed, error) {
	var out refreshed
	if len(r) < 1 {
		return out, fmt.Errorf("%w: session_refresh replied %d values", errCorrupt, len(r))
	}
	var ok bool
	if out.code, ok = r[0].(int64); !ok {
		return out, fmt.Errorf("%w: session_refresh's code", errCorrupt)
	}
	if out.code < 0 {
		return out, nil
	}
	if len(r) < 6 {
		return out, fmt.Errorf("%w: session_refresh replied %d values", errCorrupt, len(r))
	}
	dl, ok1 := r[1].(int64)
	now, ok2 := r[2].(int64)
	ix, ok3 := r[3].(string)
	epoch, ok4 := r[4].(int64)
	n, ok5 := r[5].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || n < 0 || len(r) < 6+2*int(n) {
		return out, fmt.Errorf("%w: session_refresh's header", errCorrupt)
	}
	out.deadline, out.now, out.indexed, out.stream = dl, now, ix == "1", uint64(epoch)
	for i := 6; i < 6+2*int(n); i += 2 {
		seq, ok1 := r[i].(string)
		rec, ok2 := r[i+1].(string)
		if !ok1 || !ok2 {
			return out, fmt.Errorf("%w: session_refresh's report", errCorrupt)
		}
		l, err := decodeReport(seq, rec)
		if err != nil {
			return out, err
		}
		out.reports = append(out.reports, l)
	}
	sort.Slice(out.reports, func(i, j int) bool { return out.reports[i].Seq < out.reports[j].Seq })
	var err error
	out.names, out.entries, err = decodeEntries(r[6+2*int(n):])
	return out, err
}

func (s *Store) refreshSession(ctx context.Context, op string, ref store.SessionRef, ttl time.Duration, mode string) (store.SessionState, error) {
	var st store.SessionState
	id := ref.ID
	err := s.do(ctx, op, s.keys.session(id)[0], func(ctx context.Context) error {
		sk := s.keys.session(id)
		r, err := s.eval(ctx, sessionRefresh, sk, mode, ttl.Microseconds(), store.SessionGrace.Microseconds(), ref.Stream, ref.Ack,
			s.keys.channel(store.SessionTopic(id))).Slice()
		if err != nil {
			return err
		}
		rs, err := decodeRefresh(r)
		if err != nil {
			return err
		}
		switch rs.code {
		case -3:
			return store.ErrSuperseded
		case -2:
			// A close began and was cut short: finish it, so that its locks
			// go now rather than at their deadline.
			if _, err := s.closeSession(ctx, store.SessionRef{ID: id}); err != nil && !errors.Is(err, store.ErrSessionNotFound) {
				return err
			}
			return store.ErrSessionNotFound
		case -1:
			return store.ErrSessionNotFound
		}
		dl, now := rs.deadline, rs.now
		st = store.SessionState{ID: id, Stream: rs.stream, ExpireTime: unixMicro(dl), Lost: rs.reports}
		if rs.code == 0 {
			st.Expired = true
			return nil
		}
		st.TTL = micros(dl - now)
		calls := make([]call, len(rs.entries), len(rs.entries)+1)
		for i, e := range rs.entries {
			lockMode := mode
			if mode == "resume" {
				lockMode = "renew"
			}
			if e.pending {
				lockMode = "check" // never renew a binding not yet confirmed
			}
			calls[i] = call{lockSession, s.keys.lock(rs.names[i])[:1], []any{e.token, dl, lockMode, ""}}
		}
		if mode != "check" && rs.indexed {
			calls = append(calls, call{sessionIndex, []string{s.keys.sessionIndex(store.Namespace(id))}, []any{"touch", id, dl, 0}})
		}
		// The index is bookkeeping for a cap: its failure must not fail the
		// keepalive; the locks' must (their outcome is unknown).
		cmds := s.evalPipelined(ctx, calls)[:len(rs.entries)]
		var mark []any
		var lost []store.LostLock
		for i, c := range cmds {
			held, err := c.Int64()
			if err != nil {
				return err
			}
			e := rs.entries[i]
			if held == 1 {
				if !e.pending && e.holdUntil != 0 && e.holdUntil < dl {
					if h := unixMicro(e.holdUntil); st.NextLoss.IsZero() || h.Before(st.NextLoss) {
						st.NextLoss = h
					}
				}
				continue
			}
			reason := store.LostGone
			if e.holdUntil != 0 && now >= e.holdUntil {
				reason = store.LostMaxHold
			}
			lost = append(lost, store.LostLock{Name: rs.names[i], Fence: e.fence, Reason: reason})
			mark = append(mark, rs.names[i], e.token, int(reason))
		}
		if len(mark) == 0 {
			return nil
		}
		// Only what this call took out of the set is lost: a lock released
		// by its token meanwhile left the set itself.
		seqs, err := s.eval(ctx, sessionMarkLost, sk, append([]any{""}, mark...)...).Int64Slice()
		if err != nil {
			return err
		}
		if len(seqs) != len(lost) {
			return fmt.Errorf("%w: session_mark_lost replied %d values for %d locks", errCorrupt, len(seqs), len(lost))
		}
		for i, seq := range seqs {
			if seq > 0 {
				l := lost[i]
				l.Seq = uint64(seq)
				st.Lost = append(st.Lost, l)
			}
		}
		return nil
	})
	return st, err
}

// CloseSession implements store.Sessions, in steps that a retry can finish
// if one fails: the session is marked closing (no keepalive or new lock from
// then on) and lists its locks; one pipeline deletes those it still holds
// and wakes their waiters; then the session is deleted.
func (s *Store) CloseSession(ctx context.Context, ref store.SessionRef) ([]store.ReleasedLock, error) {
	var released []store.ReleasedLock
	err := s.do(ctx, "CloseSession", s.keys.session(ref.ID)[0], func(ctx context.Context) error {
		var err error
		released, err = s.closeSession(ctx, ref)
		return err
	})
	return released, err
}

// closeSession is CloseSession's work, also used to finish a close that was
// cut short.
func (s *Store) closeSession(ctx context.Context, ref store.SessionRef) ([]store.ReleasedLock, error) {
	id := ref.ID
	sk := s.keys.session(id)
	r, err := s.eval(ctx, sessionClose, sk, "begin", store.SessionGrace.Microseconds(), ref.Stream).Slice()
	if err != nil {
		return nil, err
	}
	if len(r) < 1 {
		return nil, fmt.Errorf("%w: session_close replied nothing", errCorrupt)
	}
	code, ok := r[0].(int64)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: session_close's code", errCorrupt)
	case code == -1:
		return nil, store.ErrSessionNotFound
	case code == -3:
		return nil, store.ErrSuperseded
	case code == 0:
		return nil, nil
	case len(r) < 2:
		return nil, fmt.Errorf("%w: session_close replied %d values", errCorrupt, len(r))
	}
	ix, _ := r[1].(string)
	names, entries, err := decodeEntries(r[2:])
	if err != nil {
		return nil, err
	}
	calls := make([]call, len(entries), len(entries)+1)
	for i, e := range entries {
		calls[i] = call{lockSession, s.keys.lock(names[i])[:1], []any{e.token, 0, "drop", s.keys.channel(store.LockTopic(names[i]))}}
	}
	if ix == "1" {
		calls = append(calls, call{sessionIndex, []string{s.keys.sessionIndex(store.Namespace(id))}, []any{"remove", id, 0, 0}})
	}
	var released []store.ReleasedLock
	for i, c := range s.evalPipelined(ctx, calls)[:len(entries)] {
		r, err := c.Slice()
		if err != nil {
			return nil, err // the session stays closing; a retry finishes it
		}
		if len(r) == 2 && r[0] == int64(1) {
			held, _ := r[1].(int64)
			released = append(released, store.ReleasedLock{Name: names[i], Held: micros(held)})
		}
	}
	return released, s.eval(ctx, sessionClose, sk, "finish", 0, 0).Err()
}

// decodeEntries reads the name, entry pairs of a session's lock set from a
// script's result.
func decodeEntries(r []any) ([]string, []sessionEntry, error) {
	if len(r)%2 != 0 {
		return nil, nil, fmt.Errorf("%w: %d values for name, entry pairs", errCorrupt, len(r))
	}
	names := make([]string, 0, len(r)/2)
	entries := make([]sessionEntry, 0, len(r)/2)
	for i := 0; i+1 < len(r); i += 2 {
		name, ok1 := r[i].(string)
		rec, ok2 := r[i+1].(string)
		if !ok1 || !ok2 {
			return nil, nil, fmt.Errorf("%w: a session entry is not a string", errCorrupt)
		}
		e, err := decodeEntry(rec)
		if err != nil {
			return nil, nil, err
		}
		names = append(names, name)
		entries = append(entries, e)
	}
	return names, entries, nil
}
