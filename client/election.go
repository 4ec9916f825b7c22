package client

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// Election is a leader election bound to a session (etcd's
// concurrency.Election): one leader at a time, in arrival order across
// every coordd instance, leader while its session lives, with a value
// others read (Leader) or follow (Observe). Each term has a fence greater
// than every earlier term's.
//
// An Election is safe for use by several goroutines.
type Election struct {
	*hold
	ec coordv1.ElectionServiceClient
}

// NewElection returns the election name, campaigning with s.
func NewElection(s *Session, name string, opts HoldOptions) *Election {
	return &Election{
		hold: &hold{s: s, kind: coordv1.HoldKind_HOLD_KIND_ELECTION, name: name, opts: opts},
		ec:   coordv1.NewElectionServiceClient(s.cc),
	}
}

// Campaign waits until this session leads the election with value, or ctx
// ends. A session that already leads it gets its leadership back (its
// value unchanged: Proclaim changes it).
func (e *Election) Campaign(ctx context.Context, value []byte) error {
	return e.take(ctx, true, func(ctx context.Context, wait time.Duration) (bool, string, uint64, error) {
		resp, err := e.ec.Campaign(ctx, &coordv1.CampaignRequest{Name: e.name, Value: value, SessionId: e.s.ID(), Wait: durationpb.New(wait)})
		return resp.GetElected(), resp.GetToken(), resp.GetFence(), err
	})
}

// Proclaim sets the leader's value without an election; ErrNotHeld if this
// session does not lead.
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	token := e.held()
	if token == "" {
		return ErrNotHeld
	}
	return retry(ctx, func(ctx context.Context) error {
		_, err := e.ec.Proclaim(ctx, &coordv1.ProclaimRequest{Name: e.name, Token: token, Value: value})
		return err
	})
}

// Resign ends the leadership, as Mutex.Unlock ends a lock.
func (e *Election) Resign(ctx context.Context) error {
	return e.give(ctx, func(ctx context.Context, token string) (bool, error) {
		resp, err := e.ec.Resign(ctx, &coordv1.ResignRequest{Name: e.name, Token: token})
		return resp.GetResigned(), err
	})
}

// Leader is an election's leader as others see it.
type Leader struct {
	Value []byte
	Fence uint64
	// ElectTime is when the term began.
	ElectTime time.Time
}

// Leader returns the election's leader; ok is false if it has none.
func (e *Election) Leader(ctx context.Context) (leader Leader, ok bool, err error) {
	resp, err := e.ec.Leader(ctx, &coordv1.LeaderRequest{Name: e.name})
	if err != nil || !resp.GetHasLeader() {
		return Leader{}, false, err
	}
	return leaderOf(resp.GetLeader()), true, nil
}

// Observation is an election's state after a change: a leader, or none.
type Observation struct {
	Leader    Leader
	HasLeader bool
	// Rev counts the election's changes: a gap between two observations is
	// changes the stream missed (a slow reader, a reopened stream).
	Rev uint64
}

// Observe sends the election's state, then every change, until ctx ends or
// coordd refuses the observation (an invalid name, a key without the
// permission); then it closes the channel. A broken stream is opened again (its first
// state is the state then); a state that equals the last one sent is not
// sent again. The channel holds no backlog: a slow reader gets the
// changes late, in order, never out of order.
func (e *Election) Observe(ctx context.Context) <-chan Observation {
	return Observe(ctx, e.s.cc, e.hold.name)
}

// Observe is Election.Observe for anyone, without a session: name's
// election as seen on cc.
func Observe(ctx context.Context, cc grpc.ClientConnInterface, name string) <-chan Observation {
	ec := coordv1.NewElectionServiceClient(cc)
	out := make(chan Observation)
	go func() {
		defer close(out)
		var last *Observation
		backoff := minBackoff
		for ctx.Err() == nil {
			stream, err := ec.Observe(ctx, &coordv1.ObserveRequest{Name: name})
			for err == nil {
				var resp *coordv1.ObserveResponse
				if resp, err = stream.Recv(); err != nil {
					break
				}
				backoff = minBackoff
				o := Observation{Leader: leaderOf(resp.GetLeader()), HasLeader: resp.GetHasLeader(), Rev: resp.GetRev()}
				if last != nil && sameObservation(*last, o) {
					continue
				}
				select {
				case out <- o:
					last = &o
				case <-ctx.Done():
					return
				}
			}
			if !errors.Is(err, io.EOF) && !transient(err) && status.Code(err) != codes.DeadlineExceeded && ctx.Err() == nil {
				return // refused: a bad name, a key without the permission
			}
			if sleep(ctx, backoff/2+randDuration(backoff/2)) != nil {
				return
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}()
	return out
}

func leaderOf(l *coordv1.Leader) Leader {
	var t time.Time
	if l.GetElectTime() != nil {
		t = l.GetElectTime().AsTime()
	}
	return Leader{Value: l.GetValue(), Fence: l.GetFence(), ElectTime: t}
}

func sameObservation(a, b Observation) bool {
	return a.Rev == b.Rev && a.HasLeader == b.HasLeader && a.Leader.Fence == b.Leader.Fence
}
