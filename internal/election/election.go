// Package election implements ElectionService's rules on top of
// store.Elections: leaders bound to sessions, campaigns that wait in
// arrival order (hold.Waiters, kind HoldElection), values within bounds,
// and observers that see every change in order (store.ElectionTopic
// wake-ups, a re-read when the leader's session may have expired, and a
// count of the changes an observer that fell behind missed).
package election

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

// Store is what the service needs of a store.
type Store interface {
	store.Elections
	store.Holds
	store.Subscriber
}

// Service runs elections.
type Service struct {
	st       Store
	waiters  *hold.Waiters
	clk      clock.Clock
	cfg      Config
	drain    waiter.Drain
	cleanUps *hold.CleanUps
}

// New returns a Service on st, waiting through waiters; clk tells the
// store's time. Observers and background clean-ups end when drain is
// closed.
func New(st Store, waiters *hold.Waiters, clk clock.Clock, cfg Config, drain waiter.Drain) *Service {
	return &Service{st: st, waiters: waiters, clk: clk, cfg: cfg, drain: drain, cleanUps: hold.NewCleanUps(st, store.HoldElection, drain)}
}

// CampaignRequest asks to lead an election.
type CampaignRequest struct {
	NS, Name, SessionID string // SessionID is required
	Value               []byte // 1 to MaxValueBytes
	Wait                time.Duration
}

// Campaign makes the session the election's leader, waiting up to r.Wait
// for the current leader to go, in arrival order. Elected answers carry
// the term's Token (the session's existing one with AlreadyLeader). A
// store failure or a cancellation is returned as is, after an attempt to
// end whatever term the failed call may have begun.
func (s *Service) Campaign(ctx context.Context, r CampaignRequest) (store.Campaigned, error) {
	if err := validate.Name("name", r.Name, s.cfg.MaxNameBytes); err != nil {
		return store.Campaigned{}, err
	}
	if err := validate.Token("session_id", r.SessionID); err != nil {
		return store.Campaigned{}, err
	}
	if err := s.checkValue(r.Value); err != nil {
		return store.Campaigned{}, err
	}
	if err := validate.Wait("wait", r.Wait, s.cfg.MaxWait); err != nil {
		return store.Campaigned{}, err
	}
	req := store.Campaign{
		Name: store.Scope(r.NS, r.Name), Token: token.New(), SessionID: store.Scope(r.NS, r.SessionID),
		Value: r.Value, MaxSessionHolds: s.cfg.MaxSessionHolds,
	}
	var c store.Campaigned
	// A campaign is session-bound: never handed off (token "").
	_, err := s.waiters.Wait(ctx, store.HoldElection, req.Name, "", r.Wait, func(ctx context.Context, t *store.WaitTicket) (hold.Result, error) {
		req.Wait = t
		var err error
		c, err = s.st.Campaign(ctx, req)
		if err != nil {
			return hold.Result{}, err
		}
		// A leader leaves no room: the next campaign waits for its term's
		// end, and the store wakes this instance then.
		done := c.Elected || c.AlreadyLeader
		return hold.Result{Done: done, Full: done, RetryAt: hold.LocalTime(s.clk, c.RetryAt)}, nil
	})
	if err != nil {
		if hold.Uncertain(err) {
			s.cleanUps.Abandon(req.Name, req.Token, req.Wait, 0, true)
		}
		return store.Campaigned{}, err
	}
	if c.Elected && !c.AlreadyLeader {
		c.Token = req.Token
	}
	return c, nil
}

func (s *Service) checkValue(v []byte) error {
	if len(v) == 0 {
		return validate.Errorf("value", "is required")
	}
	return validate.Bytes("value", v, s.cfg.MaxValueBytes)
}

func (s *Service) checkToken(name, tok string) error {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return err
	}
	return validate.Token("token", tok)
}

// Proclaim sets the leader's value; store.ErrNotLeader if tok does not lead.
func (s *Service) Proclaim(ctx context.Context, ns, name, tok string, value []byte) error {
	if err := s.checkToken(name, tok); err != nil {
		return err
	}
	if err := s.checkValue(value); err != nil {
		return err
	}
	return s.st.Proclaim(ctx, store.Scope(ns, name), tok, value)
}

// Resign ends tok's leadership, and tells for how long it led; false if
// tok does not lead.
func (s *Service) Resign(ctx context.Context, ns, name, tok string) (bool, time.Duration, error) {
	if err := s.checkToken(name, tok); err != nil {
		return false, 0, err
	}
	rel, err := s.st.ReleaseHold(ctx, store.HoldElection, store.Scope(ns, name), tok, "")
	return rel.Released, rel.Held, err
}

// Leader describes the election's current leader.
func (s *Service) Leader(ctx context.Context, ns, name string) (store.LeaderInfo, error) {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return store.LeaderInfo{}, err
	}
	return s.st.Leader(ctx, store.Scope(ns, name))
}

// Wait returns when every background clean-up has ended (they end when the
// drain channel closes); no clean-up starts after it is called.
func (s *Service) Wait() { s.cleanUps.Wait() }

// expirySlack is how long after a leader's expire time an observer
// re-reads, so that the store sees the term ended.
const expirySlack = 5 * time.Millisecond

// Observe sends the election's current leader (as a change with the
// election's last revision), then every change after it, in order, until
// ctx ends (its error is returned), the drain (nil) or send fails (its
// error). missed > 0 when the store's log no longer had that many changes
// that came before c (the observer fell behind): they are not sent.
//
// It wakes on store.ElectionTopic and re-reads at the leader's expire time
// (a term that ends with its session has no event); without a subscription
// it re-reads every waiter.PollWithoutWakeups.
func (s *Service) Observe(ctx context.Context, ns, name string, send func(c store.ElectionChange, missed uint64) error) error {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return err
	}
	scoped := store.Scope(ns, name)
	var wake <-chan struct{} // nil without a subscription: never ready
	poll := time.Duration(0)
	if sub, err := s.st.Subscribe(ctx, store.ElectionTopic(scoped)); err == nil {
		defer sub.Close()
		wake = sub.C()
	} else {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		poll = waiter.PollWithoutWakeups
	}
	cur, err := s.st.Leader(ctx, scoped)
	if err != nil {
		return err
	}
	if err := send(store.ElectionChange{Rev: cur.Rev, Leader: cur}, 0); err != nil {
		return err
	}
	after := cur.Rev
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Stop()
		next := poll
		if cur.HasLeader {
			d := time.Until(hold.LocalTime(s.clk, cur.ExpireTime)) + expirySlack
			if next == 0 || d < next {
				next = max(d, expirySlack)
			}
		}
		if next > 0 {
			timer.Reset(next)
		}
		select {
		case <-wake:
		case <-timer.C:
		case <-s.drain:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		log, err := s.st.ElectionChanges(ctx, scoped, after)
		if err == nil && log.Current.Rev < after {
			// An election idle for long (no leader, no candidate) is
			// forgotten by the store, and its revisions start again from 1:
			// every change in its log is new to this stream.
			after = 0
			log, err = s.st.ElectionChanges(ctx, scoped, after)
		}
		if err != nil {
			return err
		}
		missed := log.Missed
		for _, c := range log.Changes {
			if c.Rev <= after {
				continue // not newer: never sent twice
			}
			if err := send(c, missed); err != nil {
				return err
			}
			missed = 0
			after = c.Rev
		}
		if missed > 0 { // every change after ours is gone from the log
			if err := send(store.ElectionChange{Rev: log.Current.Rev, Leader: log.Current}, missed); err != nil {
				return err
			}
			after = log.Current.Rev
		}
		cur = log.Current
	}
}
