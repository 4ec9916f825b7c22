package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// An election is a hold of kind store.HoldElection (holds.go) on the same
// scripts, which also keep its value, its revision and its log (the last
// store.ElectionLogSize changes) in the name's slot, and wake
// store.ElectionTopic on every change. Every election script first syncs
// (lua/hold_prelude.lua's clean): a leader whose term ended is logged gone.

var _ store.Elections = (*Store)(nil)

// Campaign implements store.Elections.
func (s *Store) Campaign(ctx context.Context, req store.Campaign) (store.Campaigned, error) {
	var c store.Campaigned
	err := s.do(ctx, "Campaign", s.keys.hold(store.HoldElection, req.Name)[0], func(ctx context.Context) error {
		g, a, err := s.acquireOnce(ctx, store.HoldRequest{Kind: store.HoldElection, Name: req.Name, Token: req.Token,
			SessionID: req.SessionID, MaxSessionHolds: req.MaxSessionHolds, Wait: req.Wait}, req.Value)
		if err != nil {
			return err
		}
		switch {
		case g.AlreadyHeld:
			c = store.Campaigned{Elected: true, AlreadyLeader: true, Token: g.Token, Fence: g.Fence, ExpireTime: g.ExpireTime}
		case g.Acquired:
			c = store.Campaigned{Elected: true, Fence: g.Fence, ExpireTime: g.ExpireTime}
		default:
			if err := s.leaderLives(ctx, &a.leader, a.leaderHold); err != nil {
				return err
			}
			c = store.Campaigned{Queued: g.Queued, RetryAt: g.RetryAt, Leader: a.leader}
		}
		return nil
	})
	if err != nil {
		return store.Campaigned{}, err
	}
	return c, nil
}

// electionProclaimArgs are lua/election_proclaim.lua's: the leader's
// token and the value.
type electionProclaimArgs struct {
	holdArgs
	Token string `lua:"tok"`
	Value string `lua:"value"`
}

// electionGetArgs are lua/election_get.lua's: the revision after which to
// list changes (-1: none).
type electionGetArgs struct {
	holdArgs
	After int64 `lua:"after,int"`
}

// Proclaim implements store.Elections.
func (s *Store) Proclaim(ctx context.Context, name, token string, value []byte) error {
	return s.do(ctx, "Proclaim", s.keys.hold(store.HoldElection, name)[0], func(ctx context.Context) error {
		return decodeProclaim(s.evalHold(ctx, electionProclaim, store.HoldElection, name, electionProclaimArgs{s.holdArgs(store.HoldElection, name), token, string(value)}))
	})
}

// decodeProclaim reads election_proclaim.lua's reply.
func decodeProclaim(cmd *redis.Cmd) error {
	r, err := replyOf(electionProclaim, cmd)
	if err != nil {
		return err
	}
	switch r.code(codeOK, codeNotLeader) {
	case codeNotLeader:
		return store.ErrNotLeader
	case codeOK:
		r.uint(1) // the revision
	}
	return r.done()
}

// Resign implements store.Elections: the leadership is released as any
// hold is (a session-bound one leaves its session's set first); the
// release logs it and wakes the observers and waiters.
// Leader implements store.Elections.
func (s *Store) Leader(ctx context.Context, name string) (store.LeaderInfo, error) {
	var l store.LeaderInfo
	err := s.do(ctx, "Leader", s.keys.hold(store.HoldElection, name)[0], func(ctx context.Context) error {
		log, err := s.election(ctx, name, -1)
		l = log.Current
		return err
	})
	return l, err
}

// ElectionChanges implements store.Elections.
func (s *Store) ElectionChanges(ctx context.Context, name string, after uint64) (store.ElectionLog, error) {
	var log store.ElectionLog
	err := s.do(ctx, "ElectionChanges", s.keys.hold(store.HoldElection, name)[0], func(ctx context.Context) (err error) {
		log, err = s.election(ctx, name, int64(after))
		return err
	})
	return log, err
}

// election runs election_get.lua (after -1: the leader only) and gives a
// session-bound leader its session's deadline (leaderLives).
func (s *Store) election(ctx context.Context, name string, after int64) (store.ElectionLog, error) {
	log, lh, err := decodeElection(s.evalHold(ctx, electionGet, store.HoldElection, name, electionGetArgs{s.holdArgs(store.HoldElection, name), after}), uint64(max(after, 0)))
	if err != nil {
		return log, err
	}
	fence := log.Current.Fence
	if err := s.leaderLives(ctx, &log.Current, lh); err != nil {
		return log, err
	}
	for i, c := range log.Changes {
		if c.Leader.HasLeader && c.Leader.Fence == fence && log.Current.HasLeader {
			log.Changes[i].Leader.ExpireTime = log.Current.ExpireTime // the live term's end now: a renewal is no change
		}
	}
	return log, nil
}

// decodeElection reads election_get.lua's reply: the leader (and its
// session's ID and max hold), and the changes after revision after.
func decodeElection(cmd *redis.Cmd, after uint64) (store.ElectionLog, boundHold, error) {
	r, err := replyOf(electionGet, cmd)
	if err != nil {
		return store.ElectionLog{}, boundHold{}, err
	}
	cur, lh := decodeLeader(r, 0)
	log := store.ElectionLog{Current: cur}
	first := r.uint(8)
	if err := r.done(); err != nil {
		return store.ElectionLog{}, boundHold{}, err
	}
	if first > 0 && first > after+1 && after < log.Current.Rev {
		log.Missed = min(first, log.Current.Rev+1) - after - 1
	}
	for i := 9; i < r.len(); i++ {
		e := r.str(i)
		if err := r.done(); err != nil {
			return store.ElectionLog{}, boundHold{}, err
		}
		c, err := decodeChange(e)
		if err != nil {
			return store.ElectionLog{}, boundHold{}, err
		}
		log.Changes = append(log.Changes, c)
	}
	return log, lh, nil
}

// decodeChange reads an entry of an election's log: "rev has fence elected
// expires value" (lua/hold_prelude.lua's change). Its error never quotes
// the value.
func decodeChange(e string) (store.ElectionChange, error) {
	f := strings.SplitN(e, " ", 6)
	bad := fmt.Errorf("%w: election log entry", errCorrupt)
	if len(f) != 6 || (f[1] != "0" && f[1] != "1") {
		return store.ElectionChange{}, bad
	}
	var n [4]int64
	for i, v := range []string{f[0], f[2], f[3], f[4]} {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil || x < 0 {
			return store.ElectionChange{}, bad
		}
		n[i] = x
	}
	c := store.ElectionChange{Rev: uint64(n[0])}
	c.Leader.Rev = c.Rev
	if f[1] == "1" {
		c.Leader = store.LeaderInfo{HasLeader: true, Value: []byte(f[5]), Fence: uint64(n[1]),
			ElectTime: unixMicro(n[2]), ExpireTime: unixMicro(n[3]), Rev: c.Rev}
	}
	return c, nil
}
