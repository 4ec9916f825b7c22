package main

// Tests of what coordctl asks of coordd, against a fake coordd whose
// answers a test scripts: the requests of lock --shared, lock --limit and
// elect, the rounds of a long wait, a resign at the end, and a leadership
// that Observe shows lost.

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// fakeCoordd keeps sessions alive (every heartbeat answered, a half-close
// ends the stream) and answers Lock, Acquire, Campaign, Resign and Observe
// as its functions say, recording every request. Change its fields with
// set once it serves.
type fakeCoordd struct {
	lock     func(*coordv1.LockRequest) (*coordv1.LockResponse, error)
	acquire  func(*coordv1.AcquireRequest) (*coordv1.AcquireResponse, error)
	campaign func(*coordv1.CampaignRequest) (*coordv1.CampaignResponse, error)
	resigned bool                          // Resign's answer
	lost     []*coordv1.LostLock           // every heartbeat's lost_locks
	observe  chan *coordv1.ObserveResponse // what Observe streams (nil: Unimplemented)

	mu   sync.Mutex
	reqs []proto.Message
}

// set changes f's answers while it serves.
func (f *fakeCoordd) set(change func(*fakeCoordd)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// get returns f's answers now.
func (f *fakeCoordd) get() *fakeCoordd {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fakeCoordd{lock: f.lock, acquire: f.acquire, campaign: f.campaign, resigned: f.resigned, observe: f.observe, lost: f.lost}
}

func (f *fakeCoordd) record(m proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, proto.Clone(m))
}

// requests returns the recorded requests of type T.
func requests[T proto.Message](f *fakeCoordd) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, m := range f.reqs {
		if r, ok := m.(T); ok {
			out = append(out, r)
		}
	}
	return out
}

// One type per service: their Unimplemented methods share names.
type (
	fakeSessionService struct {
		coordv1.UnimplementedSessionServiceServer
		*fakeCoordd
	}
	fakeLockService struct {
		coordv1.UnimplementedLockServiceServer
		*fakeCoordd
	}
	fakeSemaphoreService struct {
		coordv1.UnimplementedSemaphoreServiceServer
		*fakeCoordd
	}
	fakeElectionService struct {
		coordv1.UnimplementedElectionServiceServer
		*fakeCoordd
	}
)

func (f fakeSessionService) KeepAlive(s coordv1.SessionService_KeepAliveServer) error {
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.Send(&coordv1.KeepAliveResponse{SessionId: "s1", Ttl: req.GetTtl(), LostLocks: f.get().lost}); err != nil {
			return err
		}
	}
}

func (f fakeLockService) Lock(_ context.Context, req *coordv1.LockRequest) (*coordv1.LockResponse, error) {
	f.record(req)
	return f.get().lock(req)
}

func (f fakeSemaphoreService) Acquire(_ context.Context, req *coordv1.AcquireRequest) (*coordv1.AcquireResponse, error) {
	f.record(req)
	return f.get().acquire(req)
}

func (f fakeElectionService) Campaign(_ context.Context, req *coordv1.CampaignRequest) (*coordv1.CampaignResponse, error) {
	f.record(req)
	return f.get().campaign(req)
}

func (f fakeElectionService) Resign(_ context.Context, req *coordv1.ResignRequest) (*coordv1.ResignResponse, error) {
	f.record(req)
	return &coordv1.ResignResponse{Resigned: f.get().resigned}, nil
}

func (f fakeElectionService) Observe(req *coordv1.ObserveRequest, s coordv1.ElectionService_ObserveServer) error {
	f.record(req)
	observe := f.get().observe
	if observe == nil {
		return status.Error(codes.Unimplemented, "no Observe here")
	}
	for {
		select {
		case resp := <-observe:
			if err := s.Send(resp); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// serveFake serves f on loopback and returns a ctl that runs against it.
func serveFake(t *testing.T, f *fakeCoordd) ctl {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coordv1.RegisterSessionServiceServer(srv, fakeSessionService{fakeCoordd: f})
	coordv1.RegisterLockServiceServer(srv, fakeLockService{fakeCoordd: f})
	coordv1.RegisterSemaphoreServiceServer(srv, fakeSemaphoreService{fakeCoordd: f})
	coordv1.RegisterElectionServiceServer(srv, fakeElectionService{fakeCoordd: f})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return ctl{t: t, addr: l.Addr().String(), dir: t.TempDir()}
}

// waitTooLong is coordd's answer to a wait over its limits.max_wait.
func waitTooLong(wait, limit time.Duration) error {
	st, err := status.New(codes.InvalidArgument, "wait: is "+wait.String()+"; the limit is "+limit.String()).WithDetails(
		&errdetails.ErrorInfo{Reason: "INVALID_ARGUMENT", Domain: "coordd", Metadata: map[string]string{"field": "wait"}})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func TestFakeRequests(t *testing.T) {
	t.Parallel()
	f := &fakeCoordd{
		lock: func(*coordv1.LockRequest) (*coordv1.LockResponse, error) {
			return &coordv1.LockResponse{Acquired: true, Token: "lt", Fence: 3}, nil
		},
		acquire: func(*coordv1.AcquireRequest) (*coordv1.AcquireResponse, error) {
			return &coordv1.AcquireResponse{Acquired: true, Token: "at", Fence: 4, Holders: 1, Limit: 3}, nil
		},
		campaign: func(*coordv1.CampaignRequest) (*coordv1.CampaignResponse, error) {
			return &coordv1.CampaignResponse{Elected: true, Token: "ct", Fence: 5}, nil
		},
		resigned: true,
	}
	c := serveFake(t, f)
	want(t, c.run("lock", "--shared", "job", "--owner", "me", "--", "true"), 0, "", "")
	want(t, c.run("lock", "--limit", "3", "--max-hold", "1m", "--owner", "me", "pool", "--", "sh", "-c", `echo "$COORDD_FENCE $COORDD_LOCK_NAME" > out`), 0, "", "")
	if got := readFile(t, filepath.Join(c.dir, "out")); got != "4 pool" {
		t.Errorf("lock --limit's command saw %q; want the permit's fence and name, 4 pool", got)
	}
	want(t, c.run("elect", "--value", "v1", "sched", "--", "sh", "-c", `echo "$COORDD_FENCE $COORDD_ELECTION_NAME" > out`), 0, "", "")
	if got := readFile(t, filepath.Join(c.dir, "out")); got != "5 sched" {
		t.Errorf("elect's command saw %q; want the term's fence and name, 5 sched", got)
	}

	wantReq := func(got, want proto.Message) {
		t.Helper()
		if !proto.Equal(got, want) {
			t.Errorf("request %v; want %v", got, want)
		}
	}
	if l := requests[*coordv1.LockRequest](f); len(l) != 1 {
		t.Errorf("Lock requests %v; want one", l)
	} else {
		wantReq(l[0], &coordv1.LockRequest{Name: "job", SessionId: "s1", Owner: "me", Shared: true})
	}
	if a := requests[*coordv1.AcquireRequest](f); len(a) != 1 {
		t.Errorf("Acquire requests %v; want one", a)
	} else {
		wantReq(a[0], &coordv1.AcquireRequest{Name: "pool", Limit: 3, SessionId: "s1", Owner: "me", MaxHold: durationpb.New(time.Minute)})
	}
	if cr := requests[*coordv1.CampaignRequest](f); len(cr) != 1 {
		t.Errorf("Campaign requests %v; want one", cr)
	} else {
		wantReq(cr[0], &coordv1.CampaignRequest{Name: "sched", Value: []byte("v1"), SessionId: "s1"})
	}
	if r := requests[*coordv1.ResignRequest](f); len(r) != 1 {
		t.Errorf("Resign requests %v; want one", r)
	} else {
		wantReq(r[0], &coordv1.ResignRequest{Name: "sched", Token: "ct"})
	}
}

// TestFakeWaitRounds: a --wait beyond coordd's max wait is waited in
// rounds, each no longer than what coordd accepts (found by halving from
// the 1m default when --max-wait is not given), with a progress line
// between rounds.
func TestFakeWaitRounds(t *testing.T) {
	t.Parallel()
	const limit = time.Second
	var mu sync.Mutex
	rounds := 0
	notYet := func(wait time.Duration) error {
		if wait > limit {
			return waitTooLong(wait, limit)
		}
		mu.Lock()
		defer mu.Unlock()
		rounds++
		if rounds%3 != 0 {
			time.Sleep(20 * time.Millisecond) // coordd would wait the whole round
			return errNotYet
		}
		return nil
	}
	f := &fakeCoordd{
		lock: func(req *coordv1.LockRequest) (*coordv1.LockResponse, error) {
			switch err := notYet(req.GetWait().AsDuration()); {
			case errors.Is(err, errNotYet):
				return &coordv1.LockResponse{Holder: "holder x", Ttl: durationpb.New(time.Second)}, nil
			case err != nil:
				return nil, err
			}
			return &coordv1.LockResponse{Acquired: true, Token: "lt", Fence: 3}, nil
		},
		acquire: func(req *coordv1.AcquireRequest) (*coordv1.AcquireResponse, error) {
			switch err := notYet(req.GetWait().AsDuration()); {
			case errors.Is(err, errNotYet):
				return &coordv1.AcquireResponse{Holder: "holder y", Ttl: durationpb.New(time.Second), Holders: 2, Limit: 2}, nil
			case err != nil:
				return nil, err
			}
			return &coordv1.AcquireResponse{Acquired: true, Token: "at", Fence: 4}, nil
		},
		campaign: func(req *coordv1.CampaignRequest) (*coordv1.CampaignResponse, error) {
			switch err := notYet(req.GetWait().AsDuration()); {
			case errors.Is(err, errNotYet):
				return &coordv1.CampaignResponse{HasLeader: true, Leader: &coordv1.Leader{Value: []byte("leader z"), Fence: 2}}, nil
			case err != nil:
				return nil, err
			}
			return &coordv1.CampaignResponse{Elected: true, Token: "ct", Fence: 5}, nil
		},
		resigned: true,
	}
	c := serveFake(t, f)

	r := c.run("lock", "--wait", "1h", "job", "--", "true")
	want(t, r, 0, "", `coordctl: waiting for "job", held by "holder x" (1h0m0s of --wait left)`)
	if n := strings.Count(r.stderr, "waiting for"); n != 2 {
		t.Errorf("%d progress lines; want 2 (three rounds):\n%s", n, r.stderr)
	}
	var waits []time.Duration
	for _, req := range requests[*coordv1.LockRequest](f) {
		waits = append(waits, req.GetWait().AsDuration())
	}
	// 1m, 30s, ... halved until accepted: 60s/64 = 937.5ms; then that each round.
	wantWaits := []time.Duration{time.Minute, 30 * time.Second, 15 * time.Second, 7500 * time.Millisecond,
		3750 * time.Millisecond, 1875 * time.Millisecond, 937500 * time.Microsecond, 937500 * time.Microsecond, 937500 * time.Microsecond}
	if len(waits) != len(wantWaits) {
		t.Errorf("waits asked %v; want %v", waits, wantWaits)
	} else {
		for i := range waits {
			if waits[i] != wantWaits[i] {
				t.Errorf("waits asked %v; want %v", waits, wantWaits)
				break
			}
		}
	}

	// --max-wait: rounds of that at once.
	r = c.run("lock", "--limit", "2", "--wait", "10m", "--max-wait", "1s", "pool", "--", "true")
	want(t, r, 0, "", `coordctl: waiting for "pool", held by "holder y"`)
	for _, req := range requests[*coordv1.AcquireRequest](f) {
		if w := req.GetWait().AsDuration(); w != time.Second {
			t.Errorf("Acquire asked to wait %v; want --max-wait, 1s", w)
		}
	}
	r = c.run("elect", "--wait", "10m", "--max-wait", "1s", "sched", "--", "true")
	want(t, r, 0, "", `coordctl: waiting for "sched", held by "leader z"`)

	// The last round waits only what is left; then exit 75.
	f.set(func(f *fakeCoordd) {
		f.lock = func(req *coordv1.LockRequest) (*coordv1.LockResponse, error) {
			if req.GetWait().AsDuration() > limit {
				return nil, waitTooLong(req.GetWait().AsDuration(), limit)
			}
			time.Sleep(req.GetWait().AsDuration())
			return &coordv1.LockResponse{Holder: "holder x", Ttl: durationpb.New(time.Second)}, nil
		}
	})
	before := len(requests[*coordv1.LockRequest](f))
	r = c.run("lock", "--wait", "1500ms", "--max-wait", "1s", "job2", "--", "touch", "ran")
	want(t, r, exitHeld, "", `lock "job2" is held by "holder x"`)
	reqs := requests[*coordv1.LockRequest](f)[before:]
	if len(reqs) != 2 || reqs[0].GetWait().AsDuration() != time.Second || reqs[1].GetWait().AsDuration() > 500*time.Millisecond {
		t.Errorf("a --wait 1500ms in rounds of 1s asked %v; want 1s, then what was left", reqs)
	}
}

var errNotYet = errors.New("not yet")

// TestFakeElectLeadershipLost: a leadership that Observe shows taken by
// another ends the command as a lost lock does, without a resign; one that
// Resign finds gone at the end is reported lost too.
func TestFakeElectLeadershipLost(t *testing.T) {
	t.Parallel()
	f := &fakeCoordd{
		campaign: func(*coordv1.CampaignRequest) (*coordv1.CampaignResponse, error) {
			return &coordv1.CampaignResponse{Elected: true, Token: "ct", Fence: 5}, nil
		},
		observe: make(chan *coordv1.ObserveResponse, 2),
	}
	c := serveFake(t, f)
	f.observe <- &coordv1.ObserveResponse{HasLeader: true, Leader: &coordv1.Leader{Value: []byte("me"), Fence: 5}, Rev: 1}
	p := c.start("elect", "--value", "me", "--grace", "200ms", "sched", "--", "sh", "-c", holdScript)
	waitFile(t, filepath.Join(c.dir, "fence"), 10*time.Second)
	f.observe <- &coordv1.ObserveResponse{HasLeader: true, Leader: &coordv1.Leader{Value: []byte("other"), Fence: 6}, Rev: 3}
	r := p.wait(10 * time.Second)
	want(t, r, exitLeaseLost, "", `election "sched" lost: coordd's Observe shows another leader, "other" with fence 6 (rev 3); terminating the command`)
	if n := len(requests[*coordv1.ResignRequest](f)); n != 0 {
		t.Errorf("%d Resign requests after the leadership was lost; want none", n)
	}

	// Observe unavailable: the session alone watches; Resign finds the term gone.
	f.set(func(f *fakeCoordd) { f.observe, f.resigned = nil, false })
	r = c.run("elect", "sched", "--", "true")
	want(t, r, exitLeaseLost, "", "Resign answered resigned=false")
}

// TestFakeLostPermit: coordd's report of a lost permit of lock --limit's
// semaphore ends its command as a lost lock does; reports of other holds
// (a lock of the same name, another semaphore) do not, and lock (without
// --limit) and elect react to their own kind only.
func TestFakeLostPermit(t *testing.T) {
	t.Parallel()
	f := &fakeCoordd{
		lock: func(*coordv1.LockRequest) (*coordv1.LockResponse, error) {
			return &coordv1.LockResponse{Acquired: true, Token: "lt", Fence: 3}, nil
		},
		acquire: func(*coordv1.AcquireRequest) (*coordv1.AcquireResponse, error) {
			return &coordv1.AcquireResponse{Acquired: true, Token: "at", Fence: 4, Holders: 1, Limit: 2}, nil
		},
		campaign: func(*coordv1.CampaignRequest) (*coordv1.CampaignResponse, error) {
			return &coordv1.CampaignResponse{Elected: true, Token: "ct", Fence: 5}, nil
		},
		resigned: true,
	}
	lost := func(kind coordv1.HoldKind, name string, fence uint64) *coordv1.LostLock {
		return &coordv1.LostLock{Kind: kind, Name: name, Fence: fence, Reason: coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD}
	}
	others := []*coordv1.LostLock{
		lost(coordv1.HoldKind_HOLD_KIND_LOCK, "pool", 3),
		lost(coordv1.HoldKind_HOLD_KIND_UNSPECIFIED, "pool", 3), // a lock, from an older coordd
		lost(coordv1.HoldKind_HOLD_KIND_SEMAPHORE, "other", 7),
		lost(coordv1.HoldKind_HOLD_KIND_ELECTION, "pool", 8),
	}
	f.set(func(f *fakeCoordd) { f.lost = others })
	c := serveFake(t, f)
	p := c.start("lock", "--limit", "2", "--ttl", "300ms", "--grace", "200ms", "pool", "--", "sh", "-c", holdScript)
	waitFile(t, filepath.Join(c.dir, "fence"), 10*time.Second)
	time.Sleep(500 * time.Millisecond) // heartbeats every 100ms, each with the others' reports
	if !p.running() {
		t.Fatalf("lock --limit ended on reports of other holds: %v", p.wait(0))
	}
	f.set(func(f *fakeCoordd) { f.lost = append(others, lost(coordv1.HoldKind_HOLD_KIND_SEMAPHORE, "pool", 4)) })
	want(t, p.wait(10*time.Second), exitLeaseLost, "",
		`semaphore "pool" lost: coordd reports semaphore "pool" (fence 4): it reached its max hold; terminating the command`)

	// lock: a semaphore's or an election's loss of its name is not its own;
	// a lock's is, with or without a kind.
	f.set(func(f *fakeCoordd) {
		f.lost = []*coordv1.LostLock{lost(coordv1.HoldKind_HOLD_KIND_SEMAPHORE, "job", 4), lost(coordv1.HoldKind_HOLD_KIND_ELECTION, "job", 5)}
	})
	want(t, c.run("lock", "--ttl", "300ms", "job", "--", "sleep", "0.5"), 0, "", "")
	for _, kind := range []coordv1.HoldKind{coordv1.HoldKind_HOLD_KIND_LOCK, coordv1.HoldKind_HOLD_KIND_UNSPECIFIED} {
		f.set(func(f *fakeCoordd) { f.lost = []*coordv1.LostLock{lost(kind, "job", 3)} })
		want(t, c.run("lock", "--ttl", "300ms", "--grace", "200ms", "job", "--", "sleep", "5"), exitLeaseLost, "",
			`lock "job" lost: coordd reports lock "job" (fence 3): it reached its max hold`)
	}

	// elect: only a leadership's loss of its name.
	f.set(func(f *fakeCoordd) {
		f.lost = []*coordv1.LostLock{lost(coordv1.HoldKind_HOLD_KIND_LOCK, "sched", 3), lost(coordv1.HoldKind_HOLD_KIND_SEMAPHORE, "sched", 4)}
	})
	want(t, c.run("elect", "--ttl", "300ms", "sched", "--", "sleep", "0.5"), 0, "", "")
	f.set(func(f *fakeCoordd) {
		f.lost = []*coordv1.LostLock{lost(coordv1.HoldKind_HOLD_KIND_ELECTION, "sched", 5)}
	})
	want(t, c.run("elect", "--ttl", "300ms", "--grace", "200ms", "sched", "--", "sleep", "5"), exitLeaseLost, "",
		`election "sched" lost: coordd reports election "sched" (fence 5): it reached its max hold`)
}
