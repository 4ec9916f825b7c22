package storetest

import (
	"fmt"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// The cases of store.Elections: terms and their fences, values, the log of
// changes and its revisions, a leadership's end by resignation, by its
// session's close or expiry (logged lazily), lock-delay, and campaigners
// waiting in order.
func electionTests() []test {
	return []test{
		{"Elected", electElected},
		{"NeverHeld", electNeverHeld},
		{"Contended", electContended},
		{"AlreadyLeader", electAlreadyLeader},
		{"Proclaim", electProclaim},
		{"Resign", electResign},
		{"SessionCloseResigns", electSessionCloseResigns},
		{"SessionExpiryLoggedLazily", electSessionExpiryLoggedLazily},
		{"KeepAliveExtendsTerm", electKeepAliveExtendsTerm},
		{"LogSizeAndMissed", electLogSizeAndMissed},
		{"WaitingInOrder", electWaitingInOrder},
		{"LockDelay", electLockDelay},
		{"NoLockDelayOnResign", electNoLockDelayOnResign},
		{"SessionErrors", electSessionErrors},
	}
}

func campaignReq(name, id, value string) store.Campaign {
	return store.Campaign{Name: name, Token: token.New(), SessionID: id, Value: []byte(value)}
}

func campaignWaiting(c store.Campaign, instance string) store.Campaign {
	c.Wait = &store.WaitTicket{Ticket: token.New(), Instance: instance, Lease: store.WaitLease}
	return c
}

func (e *env) campaign(c store.Campaign) store.Campaigned {
	e.Helper()
	got, err := e.s.Campaign(e.ctx, c)
	noErr(e, "Campaign", err)
	return got
}

// elect makes c, which must be elected to a new term.
func (e *env) elect(c store.Campaign) store.Campaigned {
	e.Helper()
	got := e.campaign(c)
	if !got.Elected || got.AlreadyLeader || got.Fence == 0 || got.Queued || !got.RetryAt.IsZero() {
		e.Fatalf("Campaign %q = %+v; want elected to a new term", c.Value, got)
	}
	return got
}

// notElected makes c, which must not be elected, and checks the answer:
// the current leader, and RetryAt its term's end.
func (e *env) notElected(what string, c store.Campaign, leader store.LeaderInfo, retryAt time.Time, queued bool) {
	e.Helper()
	got := e.campaign(c)
	if got.Elected || got.AlreadyLeader || got.Token != "" || got.Fence != 0 || got.Queued != queued || !got.RetryAt.Equal(retryAt) {
		e.Errorf("%s: Campaign = %+v; want not elected, retry at %v, queued %v", what, got, retryAt, queued)
	}
	wantLeader(e, what+": the leader told", got.Leader, leader)
}

func (e *env) leader(name string) store.LeaderInfo {
	e.Helper()
	l, err := e.s.Leader(e.ctx, name)
	noErr(e, "Leader", err)
	return l
}

func (e *env) changes(name string, after uint64) store.ElectionLog {
	e.Helper()
	l, err := e.s.ElectionChanges(e.ctx, name, after)
	noErr(e, "ElectionChanges", err)
	return l
}

func (e *env) resign(name, tok string) bool {
	e.Helper()
	rel, err := e.s.ReleaseHold(e.ctx, store.HoldElection, name, tok, "")
	noErr(e, "ReleaseHold", err)
	return rel.Released
}

// leads is the LeaderInfo of a term c began at elected, at revision rev.
func leads(c store.Campaigned, value string, elected time.Time, rev uint64) store.LeaderInfo {
	return store.LeaderInfo{HasLeader: true, Value: []byte(value), Fence: c.Fence, ElectTime: elected, ExpireTime: c.ExpireTime, Rev: rev}
}

func noLeader(rev uint64) store.LeaderInfo { return store.LeaderInfo{Rev: rev} }

func sameLeader(got, want store.LeaderInfo) bool {
	return got.HasLeader == want.HasLeader && string(got.Value) == string(want.Value) && got.Fence == want.Fence &&
		got.ElectTime.Equal(want.ElectTime) && got.ExpireTime.Equal(want.ExpireTime) && got.Rev == want.Rev
}

// wantLeader compares every field; with no leader, only HasLeader and Rev
// matter.
func wantLeader(e *env, what string, got, want store.LeaderInfo) {
	e.Helper()
	if !want.HasLeader {
		if got.HasLeader || got.Rev != want.Rev {
			e.Errorf("%s = %+v; want no leader at rev %d", what, got, want.Rev)
		}
		return
	}
	if !sameLeader(got, want) {
		e.Errorf("%s =\n\t%+v\nwant\n\t%+v", what, got, want)
	}
}

// wantChanges checks an ElectionChanges answer: the changes, Missed and
// Current. A change's Leader is as it was then: its ExpireTime (the term's
// end as known at the change; a renewal is not a change) and Rev are not
// compared.
func (e *env) wantChanges(what string, got store.ElectionLog, missed uint64, current store.LeaderInfo, want ...store.ElectionChange) {
	e.Helper()
	ok := len(got.Changes) == len(want) && got.Missed == missed
	for i := 0; ok && i < len(want); i++ {
		g, w := got.Changes[i], want[i]
		g.Leader.Rev, w.Leader.Rev = 0, 0
		g.Leader.ExpireTime, w.Leader.ExpireTime = time.Time{}, time.Time{}
		ok = g.Rev == w.Rev && g.Leader.HasLeader == w.Leader.HasLeader && (!w.Leader.HasLeader || sameLeader(g.Leader, w.Leader))
	}
	if !ok {
		e.Errorf("%s: ElectionChanges =\n\t%+v\nwant missed %d, changes\n\t%+v", what, got, missed, want)
	}
	wantLeader(e, what+": Current", got.Current, current)
}

func change(rev uint64, l store.LeaderInfo) store.ElectionChange {
	return store.ElectionChange{Rev: rev, Leader: l}
}

// electElected: a campaign on a free election wins a term bound to its
// session, with a fence, and is the first change.
func electElected(e *env) {
	t0 := e.now()
	id := e.session(10 * time.Second)
	e.advance(time.Second)
	t1 := e.now()
	n := e.name("e")
	// A lock of the same name is apart.
	e.grant(exclusiveReq(n, "lock", time.Minute))
	c := e.elect(campaignReq(n, id, "v1"))
	if c.Fence < floor(t1) || c.Token != "" || !c.ExpireTime.Equal(t0.Add(10*time.Second)) {
		e.Errorf("Campaign = %+v; want fence >= %d, no token, expire at the session's deadline", c, floor(t1))
	}
	l := leads(c, "v1", t1, 1)
	wantLeader(e, "Leader", e.leader(n), l)
	e.wantChanges("changes after 0", e.changes(n, 0), 0, l, change(1, l))
	e.wantChanges("changes after 1", e.changes(n, 1), 0, l)
	if !e.checkFence(store.HoldElection, n, c.Fence) {
		e.Error("CheckFence of the leader's fence: false")
	}
	info := e.holds(store.HoldElection, n)
	if len(info.Holders) != 1 || info.Fence != c.Fence || !info.SessionBound {
		e.Errorf("GetHolds of the election = %+v; want the leader, session-bound", info)
	}
}

// electNeverHeld: an election never campaigned for has no leader and no
// changes.
func electNeverHeld(e *env) {
	n := e.name("e")
	wantLeader(e, "Leader", e.leader(n), noLeader(0))
	e.wantChanges("changes", e.changes(n, 0), 0, noLeader(0))
	if e.resign(n, token.New()) {
		e.Error("Resign of an election never held: true")
	}
}

// electContended: a campaign while another leads is told the leader and
// when its term may end, and waits with a ticket.
func electContended(e *env) {
	t0 := e.now()
	n := e.name("e")
	s1, s2 := e.session(10*time.Second), e.session(time.Minute)
	c := e.elect(campaignReq(n, s1, "one"))
	l := leads(c, "one", t0, 1)
	e.advance(time.Second)
	e.notElected("without a ticket", campaignReq(n, s2, "two"), l, t0.Add(10*time.Second), false)
	w := campaignWaiting(campaignReq(n, s2, "two"), newInstance())
	e.notElected("with a ticket", w, l, t0.Add(10*time.Second), true)
	e.notElected("coming back", w, l, t0.Add(10*time.Second), true)
	eq(e, "Waiters", e.waiters(store.HoldElection, n), 1)
	wantLeader(e, "Leader", e.leader(n), l)
	e.wantChanges("changes", e.changes(n, 0), 0, l, change(1, l))
}

// electAlreadyLeader: a session that leads, campaigning again, gets its
// term back, unchanged, with its token; no change is logged.
func electAlreadyLeader(e *env) {
	t0 := e.now()
	n := e.name("e")
	id := e.session(time.Minute)
	first := campaignReq(n, id, "one")
	c := e.elect(first)
	e.advance(time.Second)
	again := campaignReq(n, id, "other")
	again.MaxSessionHolds = 1
	got := e.campaign(again)
	if !got.Elected || !got.AlreadyLeader || got.Token != first.Token || got.Fence != c.Fence || !got.ExpireTime.Equal(c.ExpireTime) {
		e.Errorf("Campaign again = %+v; want the term (fence %d, its token), already leader", got, c.Fence)
	}
	l := leads(c, "one", t0, 1)
	wantLeader(e, "Leader", e.leader(n), l)
	e.wantChanges("changes", e.changes(n, 0), 0, l, change(1, l))
}

// electProclaim: the leader sets its value, a new revision that wakes
// ElectionTopic; anyone else is ErrNotLeader and changes nothing.
func electProclaim(e *env) {
	t0 := e.now()
	n := e.name("e")
	sub := e.subscribe(store.ElectionTopic(n))
	id := e.session(time.Minute)
	req := campaignReq(n, id, "one")
	c := e.elect(req)
	e.wantWake(sub, "ElectionTopic after the election")
	drain(sub)
	e.advance(time.Second)
	noErr(e, "Proclaim", e.s.Proclaim(e.ctx, n, req.Token, []byte("two")))
	e.wantWake(sub, "ElectionTopic after Proclaim")
	l1, l2 := leads(c, "one", t0, 1), leads(c, "two", t0, 2)
	wantLeader(e, "Leader", e.leader(n), l2)
	isErr(e, "Proclaim with another token", e.s.Proclaim(e.ctx, n, token.New(), []byte("three")), store.ErrNotLeader)
	isErr(e, "Proclaim of an election never held", e.s.Proclaim(e.ctx, e.name("never"), req.Token, []byte("three")), store.ErrNotLeader)
	noErr(e, "Proclaim of the same value", e.s.Proclaim(e.ctx, n, req.Token, []byte("two")))
	l3 := leads(c, "two", t0, 3)
	e.wantChanges("changes", e.changes(n, 0), 0, l3, change(1, l1), change(2, l2), change(3, l3))
	if !e.resign(n, req.Token) {
		e.Fatal("Resign: false")
	}
	isErr(e, "Proclaim after Resign", e.s.Proclaim(e.ctx, n, req.Token, []byte("four")), store.ErrNotLeader)
	wantLeader(e, "Leader after Resign", e.leader(n), noLeader(4))
}

// electResign: Resign ends the term (a change: no leader), wakes
// ElectionTopic and the waiting campaigners; the next term's fence is
// greater.
func electResign(e *env) {
	t0 := e.now()
	n := e.name("e")
	a := newInstance()
	sub, wake := e.subscribe(store.ElectionTopic(n)), e.waitSub(store.HoldElection, n, a)
	s1, s2 := e.session(time.Minute), e.session(time.Minute)
	req := campaignReq(n, s1, "one")
	c := e.elect(req)
	w := campaignWaiting(campaignReq(n, s2, "two"), a)
	w.Wait.Lease = time.Hour // outlives the clock's moves below
	if got := e.campaign(w); !got.Queued {
		e.Fatalf("a campaign behind the leader = %+v; want queued", got)
	}
	drain(sub)
	drain(wake)
	if e.resign(n, token.New()) {
		e.Error("Resign with another token: true")
	}
	wantLeader(e, "Leader after a Resign with another token", e.leader(n), leads(c, "one", t0, 1))
	e.advance(time.Second)
	if !e.resign(n, req.Token) {
		e.Fatal("Resign: false")
	}
	e.wantWake(sub, "ElectionTopic after Resign")
	e.wantWake(wake, "the waiting campaigner's instance after Resign")
	if e.resign(n, req.Token) {
		e.Error("second Resign: true")
	}
	if e.checkFence(store.HoldElection, n, c.Fence) {
		e.Error("CheckFence of a resigned term: true")
	}
	wantLeader(e, "Leader", e.leader(n), noLeader(2))
	l1 := leads(c, "one", t0, 1)
	e.wantChanges("changes", e.changes(n, 0), 0, noLeader(2), change(1, l1), change(2, noLeader(2)))
	c2 := e.elect(w)
	if c2.Fence <= c.Fence {
		e.Errorf("the next term's fence %d, want > %d", c2.Fence, c.Fence)
	}
	l3 := leads(c2, "two", t0.Add(time.Second), 3)
	e.wantChanges("changes after 1", e.changes(n, 1), 0, l3, change(2, noLeader(2)), change(3, l3))
}

// electSessionCloseResigns: closing the leader's session resigns.
func electSessionCloseResigns(e *env) {
	t0 := e.now()
	n := e.name("e")
	a := newInstance()
	sub, wake := e.subscribe(store.ElectionTopic(n)), e.waitSub(store.HoldElection, n, a)
	s1, s2 := e.session(time.Minute), e.session(time.Minute)
	c := e.elect(campaignReq(n, s1, "one"))
	w := campaignWaiting(campaignReq(n, s2, "two"), a)
	w.Wait.Lease = time.Hour // outlives the clock's moves below
	if got := e.campaign(w); !got.Queued {
		e.Fatalf("a campaign behind the leader = %+v; want queued", got)
	}
	drain(sub)
	drain(wake)
	e.advance(time.Second)
	released, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: s1})
	noErr(e, "CloseSession", err)
	want := []store.ReleasedHold{{Kind: store.HoldElection, Name: n, Held: time.Second}}
	if fmt.Sprint(released) != fmt.Sprint(want) {
		e.Errorf("CloseSession = %+v, want %+v", released, want)
	}
	e.wantWake(sub, "ElectionTopic after CloseSession")
	e.wantWake(wake, "the waiting campaigner's instance after CloseSession")
	e.wantChanges("changes", e.changes(n, 0), 0, noLeader(2), change(1, leads(c, "one", t0, 1)), change(2, noLeader(2)))
	e.elect(w) // no lock-delay after a clean close
}

// electSessionExpiryLoggedLazily: a term whose session expired is logged as
// "no leader" by the first election call after, whichever, exactly once and
// before anything else, waking ElectionTopic; the session reports it lost.
func electSessionExpiryLoggedLazily(e *env) {
	firsts := []struct {
		name  string
		first func(e *env, n string) // the first call after the expiry
	}{
		{"Leader", func(e *env, n string) { e.leader(n) }},
		{"ElectionChanges", func(e *env, n string) { e.changes(n, 1) }},
		{"Resign", func(e *env, n string) { e.resign(n, token.New()) }},
		{"Proclaim", func(e *env, n string) {
			isErr(e, "Proclaim", e.s.Proclaim(e.ctx, n, token.New(), []byte("x")), store.ErrNotLeader)
		}},
		{"CheckSession", func(e *env, n string) {}}, // the session's check below drops it first
	}
	for _, f := range firsts {
		e.sub(f.name, func(e *env) {
			t0 := e.now()
			n := e.name("e")
			id := e.session(10 * time.Second)
			req := campaignReq(n, id, "one")
			c := e.elect(req)
			l := leads(c, "one", t0, 1)
			sub := e.subscribe(store.ElectionTopic(n))
			e.advance(10*time.Second - us)
			wantLeader(e, "Leader 1µs before the session's deadline", e.leader(n), l)
			e.advance(us)
			drain(sub)
			if f.name == "CheckSession" {
				wantLost(e, "the session", e.check(id).Lost, []store.LostHold{{Kind: store.HoldElection, Name: n, Fence: c.Fence, Reason: store.LostSessionExpired}})
			}
			f.first(e, n)
			e.wantWake(sub, "ElectionTopic after the expiry was logged")
			wantLeader(e, "Leader", e.leader(n), noLeader(2))
			wantLeader(e, "Leader again", e.leader(n), noLeader(2))
			e.wantChanges("changes", e.changes(n, 0), 0, noLeader(2), change(1, l), change(2, noLeader(2)))
			isErr(e, "Proclaim by the expired term", e.s.Proclaim(e.ctx, n, req.Token, []byte("x")), store.ErrNotLeader)
			if f.name != "CheckSession" {
				wantLost(e, "the session", e.check(id).Lost, []store.LostHold{{Kind: store.HoldElection, Name: n, Fence: c.Fence, Reason: store.LostSessionExpired}})
			}
		})
	}
	// A campaign is first: the expiry's change comes before its own.
	e.sub("Campaign", func(e *env) {
		t0 := e.now()
		n := e.name("e")
		s1, s2 := e.session(10*time.Second), e.session(time.Minute)
		c1 := e.elect(campaignReq(n, s1, "one"))
		e.advance(10 * time.Second)
		c2 := e.elect(campaignReq(n, s2, "two"))
		l2 := leads(c2, "two", t0.Add(10*time.Second), 3)
		wantLeader(e, "Leader", e.leader(n), l2)
		e.wantChanges("changes", e.changes(n, 0), 0, l2, change(1, leads(c1, "one", t0, 1)), change(2, noLeader(2)), change(3, l2))
	})
}

// electKeepAliveExtendsTerm: a term follows its session's deadline; a
// renewal is not a change.
func electKeepAliveExtendsTerm(e *env) {
	t0 := e.now()
	n := e.name("e")
	id := e.session(10 * time.Second)
	c := e.elect(campaignReq(n, id, "one"))
	e.advance(5 * time.Second)
	e.keepAlive(id, 10*time.Second)
	c.ExpireTime = t0.Add(15 * time.Second)
	l := leads(c, "one", t0, 1)
	wantLeader(e, "Leader after a keepalive", e.leader(n), l)
	e.advance(10*time.Second - us)
	wantLeader(e, "Leader 1µs before the new deadline", e.leader(n), l)
	e.wantChanges("changes", e.changes(n, 0), 0, l, change(1, l))
	e.advance(us)
	wantLeader(e, "Leader at the new deadline", e.leader(n), noLeader(2))
}

// electLogSizeAndMissed: the log keeps the last ElectionLogSize changes;
// a caller further behind is told how many it missed.
func electLogSizeAndMissed(e *env) {
	t0 := e.now()
	n := e.name("e")
	id := e.session(time.Minute)
	req := campaignReq(n, id, "v1")
	c := e.elect(req)
	const extra = 11
	last := uint64(store.ElectionLogSize + extra)
	for rev := uint64(2); rev <= last; rev++ {
		noErr(e, "Proclaim", e.s.Proclaim(e.ctx, n, req.Token, fmt.Appendf(nil, "v%d", rev)))
	}
	at := func(rev uint64) store.LeaderInfo { return leads(c, fmt.Sprint("v", rev), t0, rev) }
	from := func(first uint64) []store.ElectionChange {
		var cs []store.ElectionChange
		for rev := first; rev <= last; rev++ {
			cs = append(cs, change(rev, at(rev)))
		}
		return cs
	}
	cur := at(last)
	firstKept := last - store.ElectionLogSize + 1 // extra + 1
	e.wantChanges("changes after 0", e.changes(n, 0), firstKept-1, cur, from(firstKept)...)
	e.wantChanges("changes after firstKept-2", e.changes(n, firstKept-2), 1, cur, from(firstKept)...)
	e.wantChanges("changes after firstKept-1", e.changes(n, firstKept-1), 0, cur, from(firstKept)...)
	e.wantChanges("changes after firstKept", e.changes(n, firstKept), 0, cur, from(firstKept+1)...)
	e.wantChanges("changes after last-3", e.changes(n, last-3), 0, cur, from(last-2)...)
	e.wantChanges("changes after last", e.changes(n, last), 0, cur)
}

// electWaitingInOrder: waiting campaigners are elected in arrival order,
// whatever order they come back in; each end of a term wakes only the
// instance of the next in line.
func electWaitingInOrder(e *env) {
	t0 := e.now()
	n := e.name("e")
	a, b := newInstance(), newInstance()
	subA, subB := e.waitSub(store.HoldElection, n, a), e.waitSub(store.HoldElection, n, b)
	lead := campaignReq(n, e.session(time.Minute), "l")
	e.elect(lead)
	ws := []store.Campaign{
		campaignWaiting(campaignReq(n, e.session(time.Minute), "c1"), a),
		campaignWaiting(campaignReq(n, e.session(time.Minute), "c2"), b),
		campaignWaiting(campaignReq(n, e.session(time.Minute), "c3"), a),
	}
	for _, w := range ws {
		if got := e.campaign(w); got.Elected || !got.Queued {
			e.Fatalf("campaign %s = %+v; want queued", w.Value, got)
		}
	}
	subs := []*store.Subscription{subA, subB, subA}
	others := []*store.Subscription{subB, subA, subB}
	prev := lead
	var lastFence uint64
	for i, w := range ws {
		drain(subA)
		drain(subB)
		if !e.resign(n, prev.Token) {
			e.Fatalf("Resign before campaigner %d: false", i)
		}
		e.wantWake(subs[i], fmt.Sprint("the instance of campaigner ", i, " at the head"))
		e.wantNoWake(others[i], fmt.Sprint("the other instance, when campaigner ", i, " is at the head"))
		for j := len(ws) - 1; j > i; j-- {
			if got := e.campaign(ws[j]); got.Elected || !got.Queued {
				e.Fatalf("campaigner %d while %d is ahead = %+v; want queued", j, i, got)
			}
		}
		c := e.elect(w)
		if c.Fence <= lastFence {
			e.Errorf("campaigner %d's fence %d, want > %d", i, c.Fence, lastFence)
		}
		lastFence = c.Fence
		prev = w
	}
	log := e.changes(n, 0)
	eq(e, "changes", len(log.Changes), 7)
	for i, ch := range log.Changes {
		eq(e, fmt.Sprint("change ", i, "'s Rev"), ch.Rev, uint64(i+1))
		eq(e, fmt.Sprint("change ", i, " has a leader"), ch.Leader.HasLeader, i%2 == 0)
	}
	wantLeader(e, "Leader", e.leader(n), store.LeaderInfo{HasLeader: true, Value: []byte("c3"), Fence: lastFence, ElectTime: t0, ExpireTime: t0.Add(time.Minute), Rev: 7})
}

// electLockDelay: a term whose session expired keeps the election from
// anyone until its deadline + the session's lock-delay.
func electLockDelay(e *env) {
	const d = 5 * time.Second
	t0 := e.now()
	n := e.name("e")
	s1, s2 := e.sessionWithDelay(10*time.Second, d), e.session(time.Hour)
	e.elect(campaignReq(n, s1, "one"))
	dl := t0.Add(10 * time.Second)
	e.advance(10*time.Second + d - us)
	w := campaignWaiting(campaignReq(n, s2, "two"), newInstance())
	e.notElected("1µs before the delay ends", w, noLeader(2), dl.Add(d), true)
	e.advance(us)
	e.elect(w)
}

// electNoLockDelayOnResign: a resigned term, or one whose session closed,
// sets no delay.
func electNoLockDelayOnResign(e *env) {
	const d = 5 * time.Second
	n := e.name("e")
	s1, s2 := e.sessionWithDelay(time.Minute, d), e.session(time.Hour)
	req := campaignReq(n, s1, "one")
	e.elect(req)
	if !e.resign(n, req.Token) {
		e.Fatal("Resign: false")
	}
	e.elect(campaignReq(n, s2, "two"))

	m := e.name("closed")
	s3 := e.sessionWithDelay(time.Minute, d)
	e.elect(campaignReq(m, s3, "one"))
	_, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: s3})
	noErr(e, "CloseSession", err)
	e.elect(campaignReq(m, s2, "two"))
}

// electSessionErrors: a campaign needs a live session.
func electSessionErrors(e *env) {
	n := e.name("e")
	_, err := e.s.Campaign(e.ctx, campaignReq(n, token.New(), "x"))
	isErr(e, "Campaign with an unknown session", err, store.ErrSessionNotFound)
	id := e.session(time.Second)
	e.advance(time.Second)
	_, err = e.s.Campaign(e.ctx, campaignReq(n, id, "x"))
	isErr(e, "Campaign with an expired session", err, store.ErrSessionNotFound)
	wantLeader(e, "Leader", e.leader(n), noLeader(0))
}
