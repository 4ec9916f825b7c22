package redis

import (
	"context"
	"errors"
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
		st = store.SessionState{ID: id, TTL: micros(dl - now), ExpireTime: unixMicro(dl)}
		return nil
	})
	return st, err
}

// KeepAliveSession implements store.Sessions: one script renews the session
// and lists its locks, then one pipeline (a round trip per node) extends
// every lock (and touches the namespace's index), and, if any lock was
// lost, one more script takes the lost ones out of the session's set.
func (s *Store) KeepAliveSession(ctx context.Context, id string, ttl time.Duration) (store.SessionState, error) {
	return s.refreshSession(ctx, "KeepAliveSession", id, ttl, "renew")
}

// CheckSession implements store.Sessions.
func (s *Store) CheckSession(ctx context.Context, id string) (store.SessionState, error) {
	return s.refreshSession(ctx, "CheckSession", id, 0, "check")
}

func (s *Store) refreshSession(ctx context.Context, op, id string, ttl time.Duration, mode string) (store.SessionState, error) {
	var st store.SessionState
	err := s.do(ctx, op, s.keys.session(id)[0], func(ctx context.Context) error {
		sk := s.keys.session(id)
		r, err := s.eval(ctx, sessionRefresh, sk, mode, ttl.Microseconds(), store.SessionGrace.Microseconds()).Slice()
		if err != nil {
			return err
		}
		code := toInt(r[0])
		if code == -2 {
			// A close began and was cut short: finish it, so that its locks
			// go now rather than at their deadline.
			if _, err := s.closeSession(ctx, id); err != nil && !errors.Is(err, store.ErrSessionNotFound) {
				return err
			}
		}
		if code < 0 {
			return store.ErrSessionNotFound
		}
		dl, now, indexed := toInt(r[1]), toInt(r[2]), toStr(r[3]) == "1"
		names, entries, err := decodeEntries(r[4:])
		if err != nil {
			return err
		}
		st = store.SessionState{ID: id, ExpireTime: unixMicro(dl)}
		if code == 0 {
			st.Expired = true
			for i, e := range entries {
				reason := store.LostSessionExpired
				if e.holdUntil != 0 && e.holdUntil <= dl {
					reason = store.LostMaxHold
				}
				st.Lost = append(st.Lost, store.LostLock{Name: names[i], Fence: e.fence, Reason: reason})
			}
			return nil
		}
		st.TTL = micros(dl - now)
		calls := make([]call, len(entries), len(entries)+1)
		for i, e := range entries {
			calls[i] = call{lockSession, s.keys.lock(names[i])[:1], []any{e.token, dl, mode, ""}}
		}
		if mode == "renew" && indexed {
			calls = append(calls, call{sessionIndex, []string{s.keys.sessionIndex(store.Namespace(id))}, []any{"touch", id, dl, 0}})
		}
		// The index is bookkeeping for a cap: its failure must not fail the
		// keepalive; the locks' must (their outcome is unknown).
		cmds := s.evalPipelined(ctx, calls)[:len(entries)]
		var remove []any
		lost := map[string]store.LostLock{}
		for i, c := range cmds {
			held, err := c.Int64()
			if err != nil {
				return err
			}
			if held == 1 {
				continue
			}
			e := entries[i]
			reason := store.LostGone
			if e.holdUntil != 0 && now >= e.holdUntil {
				reason = store.LostMaxHold
			}
			lost[names[i]] = store.LostLock{Name: names[i], Fence: e.fence, Reason: reason}
			remove = append(remove, names[i], e.token)
		}
		if len(remove) == 0 {
			return nil
		}
		// Only what this call took out of the set is lost: a lock released
		// by its token meanwhile left the set itself.
		removed, err := s.eval(ctx, sessionRemoveLocks, sk[1:], remove...).StringSlice()
		if err != nil {
			return err
		}
		for _, name := range removed {
			st.Lost = append(st.Lost, lost[name])
		}
		return nil
	})
	return st, err
}

// CloseSession implements store.Sessions, in steps that a retry can finish
// if one fails: the session is marked closing (no keepalive or new lock from
// then on) and lists its locks; one pipeline deletes those it still holds
// and wakes their waiters; then the session is deleted.
func (s *Store) CloseSession(ctx context.Context, id string) ([]string, error) {
	var released []string
	err := s.do(ctx, "CloseSession", s.keys.session(id)[0], func(ctx context.Context) error {
		var err error
		released, err = s.closeSession(ctx, id)
		return err
	})
	return released, err
}

// closeSession is CloseSession's work, also used to finish a close that was
// cut short.
func (s *Store) closeSession(ctx context.Context, id string) ([]string, error) {
	sk := s.keys.session(id)
	r, err := s.eval(ctx, sessionClose, sk, "begin", store.SessionGrace.Microseconds()).Slice()
	if err != nil {
		return nil, err
	}
	switch toInt(r[0]) {
	case -1:
		return nil, store.ErrSessionNotFound
	case 0:
		return nil, nil
	}
	indexed := toStr(r[1]) == "1"
	names, entries, err := decodeEntries(r[2:])
	if err != nil {
		return nil, err
	}
	calls := make([]call, len(entries), len(entries)+1)
	for i, e := range entries {
		calls[i] = call{lockSession, s.keys.lock(names[i])[:1], []any{e.token, 0, "drop", s.keys.channel(store.LockTopic(names[i]))}}
	}
	if indexed {
		calls = append(calls, call{sessionIndex, []string{s.keys.sessionIndex(store.Namespace(id))}, []any{"remove", id, 0, 0}})
	}
	var released []string
	for i, c := range s.evalPipelined(ctx, calls)[:len(entries)] {
		n, err := c.Int64()
		if err != nil {
			return nil, err // the session stays closing; a retry finishes it
		}
		if n == 1 {
			released = append(released, names[i])
		}
	}
	return released, s.eval(ctx, sessionClose, sk, "finish", 0).Err()
}

// decodeEntries reads the name, entry pairs of a session's lock set from a
// script's result.
func decodeEntries(r []any) ([]string, []sessionEntry, error) {
	names := make([]string, 0, len(r)/2)
	entries := make([]sessionEntry, 0, len(r)/2)
	for i := 0; i+1 < len(r); i += 2 {
		e, err := decodeEntry(toStr(r[i+1]))
		if err != nil {
			return nil, nil, err
		}
		names = append(names, toStr(r[i]))
		entries = append(entries, e)
	}
	return names, entries, nil
}
