package storetest

import (
	"fmt"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

func idemTests() []test {
	return []test{
		{"ExecuteThenCompleted", idemExecuteThenCompleted},
		{"EmptyResult", idemEmptyResult},
		{"FailedCached", idemFailedCached},
		{"RetryableClears", idemRetryableClears},
		{"FingerprintMismatch", idemFingerprintMismatch},
		{"TakeoverAfterDeadline", idemTakeoverAfterDeadline},
		{"NotOwnerJustAfterDeadline", idemNotOwnerJustAfterDeadline},
		{"OwnerUntilDeadline", idemOwnerUntilDeadline},
		{"NotOwner", idemNotOwner},
		{"Extend", idemExtend},
		{"ExtendOutlivesRetention", idemExtendOutlivesRetention},
		{"Retention", idemRetention},
		{"DeadlineInstant", idemDeadlineInstant},
		{"Truncation", idemTruncation},
		{"ConcurrentBegin", idemConcurrentBegin},
		{"FinishWakes", idemFinishWakes},
	}
}

const retention = time.Hour

func (e *env) begin(key, fp, owner string, ttl time.Duration) store.IdemState {
	e.Helper()
	st, err := e.s.BeginIdempotent(e.ctx, store.BeginIdempotent{Key: key, Fingerprint: fp, OwnerToken: owner, ProcessingTTL: ttl, Retention: retention})
	noErr(e, "BeginIdempotent "+key, err)
	return st
}

func (e *env) finish(req store.FinishIdempotent) {
	e.Helper()
	noErr(e, "FinishIdempotent "+req.Key, e.s.FinishIdempotent(e.ctx, req))
}

func (e *env) wantIdem(what string, got, want store.IdemState) {
	e.Helper()
	sameFailure := (got.Failure == nil) == (want.Failure == nil) && (got.Failure == nil || *got.Failure == *want.Failure)
	if got.Outcome != want.Outcome || got.OwnerToken != want.OwnerToken || string(got.Result) != string(want.Result) ||
		!sameFailure || !got.ExpireTime.Equal(want.ExpireTime) || got.TTL != want.TTL {
		e.Errorf("%s: state =\n\t%s\nwant\n\t%s", what, fmtIdem(got), fmtIdem(want))
	}
}

func fmtIdem(s store.IdemState) string {
	f := "<nil>"
	if s.Failure != nil {
		f = fmt.Sprintf("%+v", *s.Failure)
	}
	return fmt.Sprintf("{Outcome:%d OwnerToken:%q Result:%q Failure:%s ExpireTime:%v TTL:%v}", s.Outcome, s.OwnerToken, s.Result, f, s.ExpireTime, s.TTL)
}

func executing(owner string, expire time.Time, ttl time.Duration) store.IdemState {
	return store.IdemState{Outcome: store.Execute, OwnerToken: owner, ExpireTime: expire, TTL: ttl}
}

func inProgress(expire time.Time, ttl time.Duration) store.IdemState {
	return store.IdemState{Outcome: store.InProgress, ExpireTime: expire, TTL: ttl}
}

// binaryResult has every byte value, so that a backend that treats results
// as text fails.
var binaryResult = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

func idemExecuteThenCompleted(e *env) {
	k := e.name("k")
	t0 := e.now()
	a := token.New()
	e.wantIdem("first begin", e.begin(k, "fp", a, 10*time.Second), executing(a, t0.Add(10*time.Second), 10*time.Second))
	e.advance(3 * time.Second)
	// OwnerToken is only for the owner: others must not be able to finish.
	e.wantIdem("begin while processing", e.begin(k, "fp", token.New(), 10*time.Second), inProgress(t0.Add(10*time.Second), 7*time.Second))
	e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Result: binaryResult, ResultTTL: time.Hour})
	t1 := e.now()
	e.advance(time.Second)
	want := store.IdemState{Outcome: store.Completed, Result: binaryResult, ExpireTime: t1.Add(time.Hour), TTL: time.Hour - time.Second}
	e.wantIdem("begin after finish", e.begin(k, "fp", token.New(), 10*time.Second), want)
	e.advance(time.Hour - time.Second - us)
	want.TTL = us
	e.wantIdem("begin 1µs before the result expires", e.begin(k, "fp", token.New(), 10*time.Second), want)
	e.advance(2 * us)
	b := token.New()
	e.wantIdem("begin after the result expired", e.begin(k, "other", b, 10*time.Second), executing(b, e.now().Add(10*time.Second), 10*time.Second))
}

func idemEmptyResult(e *env) {
	k := e.name("k")
	a := token.New()
	e.begin(k, "fp", a, 10*time.Second)
	e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte{}, ResultTTL: time.Minute})
	t0 := e.now()
	e.wantIdem("begin after an empty result", e.begin(k, "fp", token.New(), 10*time.Second),
		store.IdemState{Outcome: store.Completed, ExpireTime: t0.Add(time.Minute), TTL: time.Minute})
}

func idemFailedCached(e *env) {
	k := e.name("k")
	a := token.New()
	e.begin(k, "fp", a, 10*time.Second)
	e.advance(time.Second)
	t1 := e.now()
	e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Failure: &store.Failure{Message: "card declined"}, ResultTTL: 30 * time.Minute})
	e.advance(time.Minute)
	want := store.IdemState{Outcome: store.Failed, Failure: &store.Failure{Message: "card declined"}, ExpireTime: t1.Add(30 * time.Minute), TTL: 29 * time.Minute}
	e.wantIdem("begin after a terminal failure", e.begin(k, "fp", token.New(), 10*time.Second), want)
	e.wantIdem("begin again", e.begin(k, "fp", token.New(), 10*time.Second), want)
	e.advance(29*time.Minute + us)
	b := token.New()
	e.wantIdem("begin after the failure expired", e.begin(k, "fp", b, 10*time.Second), executing(b, e.now().Add(10*time.Second), 10*time.Second))
}

func idemRetryableClears(e *env) {
	for i, fp := range []string{"fp", "other"} {
		k := e.name(fmt.Sprint("k", i))
		a := token.New()
		e.begin(k, "fp", a, 10*time.Second)
		sub := e.subscribe(store.IdemTopic(k))
		drain(sub)
		e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Failure: &store.Failure{Message: "timeout", Retryable: true}, ResultTTL: time.Hour})
		e.wantWake(sub, "IdemTopic after a retryable failure")
		b := token.New()
		e.wantIdem("begin with fingerprint "+fp+" after a retryable failure", e.begin(k, fp, b, 10*time.Second), executing(b, e.now().Add(10*time.Second), 10*time.Second))
		err := e.s.FinishIdempotent(e.ctx, store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("late"), ResultTTL: time.Hour})
		isErr(e, "Finish by the owner of the cleared key", err, store.ErrNotOwner)
	}
}

// idemFingerprintMismatch checks the fingerprint in every state: a Begin
// with another one is ErrFingerprintMismatch and changes nothing.
func idemFingerprintMismatch(e *env) {
	states := []struct {
		name  string
		setup func(e *env, k string)
		want  store.Outcome // of a Begin with the right fingerprint after
	}{
		{"Processing", func(e *env, k string) { e.begin(k, "fp", token.New(), 10*time.Second) }, store.InProgress},
		{"Completed", func(e *env, k string) {
			a := token.New()
			e.begin(k, "fp", a, 10*time.Second)
			e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("ok"), ResultTTL: time.Hour})
		}, store.Completed},
		{"Failed", func(e *env, k string) {
			a := token.New()
			e.begin(k, "fp", a, 10*time.Second)
			e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Failure: &store.Failure{Message: "no"}, ResultTTL: time.Hour})
		}, store.Failed},
		{"Abandoned", func(e *env, k string) {
			e.begin(k, "fp", token.New(), 10*time.Second)
			e.advance(10*time.Second + us)
		}, store.Execute},
		{"TakenOver", func(e *env, k string) {
			e.begin(k, "fp", token.New(), 10*time.Second)
			e.advance(10*time.Second + us)
			if st := e.begin(k, "fp", token.New(), 10*time.Second); st.Outcome != store.Execute {
				e.Fatalf("takeover: outcome %d, want Execute", st.Outcome)
			}
		}, store.InProgress},
	}
	for _, s := range states {
		e.sub(s.name, func(e *env) {
			k := e.name("k")
			s.setup(e, k)
			for _, fp := range []string{"other", "", "fp "} {
				_, err := e.s.BeginIdempotent(e.ctx, store.BeginIdempotent{Key: k, Fingerprint: fp, OwnerToken: token.New(), ProcessingTTL: 10 * time.Second, Retention: retention})
				isErr(e, fmt.Sprintf("begin with fingerprint %q", fp), err, store.ErrFingerprintMismatch)
			}
			if st := e.begin(k, "fp", token.New(), 10*time.Second); st.Outcome != s.want {
				e.Errorf("begin with the right fingerprint after the mismatches: %s, want outcome %d", fmtIdem(st), s.want)
			}
		})
	}
}

func idemTakeoverAfterDeadline(e *env) {
	k := e.name("k")
	a, b := token.New(), token.New()
	e.begin(k, "fp", a, 10*time.Second)
	e.advance(15 * time.Second)
	t1 := e.now()
	e.wantIdem("takeover", e.begin(k, "fp", b, 20*time.Second), executing(b, t1.Add(20*time.Second), 20*time.Second))
	err := e.s.FinishIdempotent(e.ctx, store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("stale"), ResultTTL: time.Hour})
	isErr(e, "Finish by the old owner", err, store.ErrNotOwner)
	_, err = e.s.ExtendIdempotent(e.ctx, k, a, time.Minute)
	isErr(e, "Extend by the old owner", err, store.ErrNotOwner)
	e.wantIdem("begin after the old owner's attempts", e.begin(k, "fp", token.New(), 10*time.Second), inProgress(t1.Add(20*time.Second), 20*time.Second))
	e.finish(store.FinishIdempotent{Key: k, OwnerToken: b, Result: []byte("fresh"), ResultTTL: time.Hour})
	e.wantIdem("begin after the new owner's finish", e.begin(k, "fp", token.New(), 10*time.Second),
		store.IdemState{Outcome: store.Completed, Result: []byte("fresh"), ExpireTime: t1.Add(time.Hour), TTL: time.Hour})
}

func idemNotOwnerJustAfterDeadline(e *env) {
	k := e.name("k")
	a := token.New()
	e.begin(k, "fp", a, 10*time.Second)
	e.advance(10*time.Second + us)
	err := e.s.FinishIdempotent(e.ctx, store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("late"), ResultTTL: time.Hour})
	isErr(e, "Finish 1µs after the deadline", err, store.ErrNotOwner)
	_, err = e.s.ExtendIdempotent(e.ctx, k, a, time.Minute)
	isErr(e, "Extend 1µs after the deadline", err, store.ErrNotOwner)
	b := token.New()
	// The late Finish stored nothing: the key is abandoned and taken over.
	e.wantIdem("begin after the late finish", e.begin(k, "fp", b, 10*time.Second), executing(b, e.now().Add(10*time.Second), 10*time.Second))
}

func idemOwnerUntilDeadline(e *env) {
	k1, k2 := e.name("k1"), e.name("k2")
	a1, a2 := token.New(), token.New()
	e.begin(k1, "fp", a1, 10*time.Second)
	e.begin(k2, "fp", a2, 10*time.Second)
	e.advance(10*time.Second - us)
	e.finish(store.FinishIdempotent{Key: k1, OwnerToken: a1, Result: []byte("just in time"), ResultTTL: time.Hour})
	exp, err := e.s.ExtendIdempotent(e.ctx, k2, a2, time.Minute)
	noErr(e, "Extend 1µs before the deadline", err)
	eqTime(e, "Extend", exp, e.now().Add(time.Minute))
	e.wantIdem("begin k1", e.begin(k1, "fp", token.New(), time.Second),
		store.IdemState{Outcome: store.Completed, Result: []byte("just in time"), ExpireTime: e.now().Add(time.Hour), TTL: time.Hour})
}

func idemNotOwner(e *env) {
	k := e.name("k")
	t0 := e.now()
	a := token.New()
	e.begin(k, "fp", a, 10*time.Second)
	err := e.s.FinishIdempotent(e.ctx, store.FinishIdempotent{Key: k, OwnerToken: token.New(), Result: []byte("x"), ResultTTL: time.Hour})
	isErr(e, "Finish with another token", err, store.ErrNotOwner)
	_, err = e.s.ExtendIdempotent(e.ctx, k, token.New(), time.Minute)
	isErr(e, "Extend with another token", err, store.ErrNotOwner)
	e.wantIdem("begin after the attempts", e.begin(k, "fp", token.New(), 10*time.Second), inProgress(t0.Add(10*time.Second), 10*time.Second))

	e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("first"), ResultTTL: time.Hour})
	err = e.s.FinishIdempotent(e.ctx, store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("second"), ResultTTL: time.Hour})
	isErr(e, "second Finish", err, store.ErrNotOwner)
	_, err = e.s.ExtendIdempotent(e.ctx, k, a, time.Minute)
	isErr(e, "Extend after Finish", err, store.ErrNotOwner)
	e.wantIdem("begin after the second finish", e.begin(k, "fp", token.New(), 10*time.Second),
		store.IdemState{Outcome: store.Completed, Result: []byte("first"), ExpireTime: t0.Add(time.Hour), TTL: time.Hour})

	err = e.s.FinishIdempotent(e.ctx, store.FinishIdempotent{Key: e.name("never"), OwnerToken: a, Result: []byte("x"), ResultTTL: time.Hour})
	isErr(e, "Finish of an unknown key", err, store.ErrNotOwner)
	_, err = e.s.ExtendIdempotent(e.ctx, e.name("never"), a, time.Minute)
	isErr(e, "Extend of an unknown key", err, store.ErrNotOwner)
}

func idemExtend(e *env) {
	k := e.name("k")
	t0 := e.now()
	a := token.New()
	e.begin(k, "fp", a, 10*time.Second)
	e.advance(8 * time.Second)
	exp, err := e.s.ExtendIdempotent(e.ctx, k, a, 10*time.Second)
	noErr(e, "Extend", err)
	eqTime(e, "Extend", exp, t0.Add(18*time.Second))
	e.advance(7 * time.Second) // past the first deadline
	e.wantIdem("begin past the first deadline", e.begin(k, "fp", token.New(), 10*time.Second), inProgress(t0.Add(18*time.Second), 3*time.Second))
	// Extend may shorten, too: the deadline is now + ttl.
	exp, err = e.s.ExtendIdempotent(e.ctx, k, a, time.Second)
	noErr(e, "shortening Extend", err)
	eqTime(e, "shortening Extend", exp, t0.Add(16*time.Second))
	e.wantIdem("begin after shortening", e.begin(k, "fp", token.New(), 10*time.Second), inProgress(t0.Add(16*time.Second), time.Second))
	e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("done"), ResultTTL: time.Minute})
}

// idemExtendOutlivesRetention checks that an extended key is kept while its
// owner works, even past its first deadline plus Retention.
func idemExtendOutlivesRetention(e *env) {
	k := e.name("k")
	t0 := e.now()
	a := token.New()
	_, err := e.s.BeginIdempotent(e.ctx, store.BeginIdempotent{Key: k, Fingerprint: "fp", OwnerToken: a, ProcessingTTL: 10 * time.Second, Retention: 5 * time.Second})
	noErr(e, "Begin", err)
	e.advance(9 * time.Second)
	_, err = e.s.ExtendIdempotent(e.ctx, k, a, time.Minute)
	noErr(e, "Extend", err)
	e.advance(11 * time.Second) // t0+20s: past 10s + 5s
	e.wantIdem("begin while extended", e.begin(k, "fp", token.New(), 10*time.Second), inProgress(t0.Add(69*time.Second), 49*time.Second))
	_, err = e.s.BeginIdempotent(e.ctx, store.BeginIdempotent{Key: k, Fingerprint: "other", OwnerToken: token.New(), ProcessingTTL: time.Second, Retention: time.Second})
	isErr(e, "begin with another fingerprint while extended", err, store.ErrFingerprintMismatch)
	e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("done"), ResultTTL: time.Minute})
}

func idemRetention(e *env) {
	k := e.name("k")
	_, err := e.s.BeginIdempotent(e.ctx, store.BeginIdempotent{Key: k, Fingerprint: "fp", OwnerToken: token.New(), ProcessingTTL: 10 * time.Second, Retention: time.Hour})
	noErr(e, "Begin", err)
	e.advance(10*time.Second + time.Hour - us)
	_, err = e.s.BeginIdempotent(e.ctx, store.BeginIdempotent{Key: k, Fingerprint: "other", OwnerToken: token.New(), ProcessingTTL: time.Second, Retention: time.Second})
	isErr(e, "begin with another fingerprint within retention", err, store.ErrFingerprintMismatch)
	e.advance(2 * us)
	b := token.New()
	e.wantIdem("begin with another fingerprint after retention", e.begin(k, "other", b, 10*time.Second), executing(b, e.now().Add(10*time.Second), 10*time.Second))
}

func idemTruncation(e *env) {
	k := e.name("k")
	e.clk.Set(base.Add(1500 * time.Nanosecond))
	t0 := base.Add(us)
	a := token.New()
	e.wantIdem("begin", e.begin(k, "fp", a, 10*time.Second+999*time.Nanosecond), executing(a, t0.Add(10*time.Second), 10*time.Second))
	exp, err := e.s.ExtendIdempotent(e.ctx, k, a, 20*time.Second+time.Nanosecond)
	noErr(e, "Extend", err)
	eqTime(e, "Extend", exp, t0.Add(20*time.Second))
	e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("r"), ResultTTL: time.Minute + 999*time.Nanosecond})
	e.wantIdem("begin after finish", e.begin(k, "fp", token.New(), time.Second),
		store.IdemState{Outcome: store.Completed, Result: []byte("r"), ExpireTime: t0.Add(time.Minute), TTL: time.Minute})
}

func idemConcurrentBegin(e *env) {
	k := e.name("k")
	t0 := e.now()
	const workers = 100
	owners := make([]string, workers)
	states := make([]store.IdemState, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		owners[i] = token.New()
		wg.Go(func() {
			<-start
			states[i], errs[i] = e.s.BeginIdempotent(e.ctx, store.BeginIdempotent{Key: k, Fingerprint: "fp", OwnerToken: owners[i], ProcessingTTL: 10 * time.Second, Retention: retention})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, st := range states {
		noErr(e, "Begin", errs[i])
		if st.Outcome == store.Execute {
			if winner >= 0 {
				e.Fatalf("workers %d and %d both got Execute", winner, i)
			}
			winner = i
			e.wantIdem(fmt.Sprint("worker ", i), st, executing(owners[i], t0.Add(10*time.Second), 10*time.Second))
		} else {
			e.wantIdem(fmt.Sprint("worker ", i), st, inProgress(t0.Add(10*time.Second), 10*time.Second))
		}
	}
	if winner < 0 {
		e.Fatal("no worker got Execute")
	}
	e.finish(store.FinishIdempotent{Key: k, OwnerToken: owners[winner], Result: []byte("once"), ResultTTL: time.Minute})
}

func idemFinishWakes(e *env) {
	for i, f := range []*store.Failure{nil, {Message: "terminal"}, {Message: "retry", Retryable: true}} {
		k := e.name(fmt.Sprint("k", i))
		a := token.New()
		e.begin(k, "fp", a, 10*time.Second)
		sub := e.subscribe(store.IdemTopic(k))
		drain(sub)
		e.finish(store.FinishIdempotent{Key: k, OwnerToken: a, Result: []byte("r"), Failure: f, ResultTTL: time.Minute})
		e.wantWake(sub, fmt.Sprintf("IdemTopic after Finish with failure %+v", f))
	}
}

// idemDeadlineInstant checks the instants themselves. As for locks, a
// deadline or expiry time is the first instant at which what it bounds is
// over: there, the TTL left until it is 0.
func idemDeadlineInstant(e *env) {
	k1, k2, k3 := e.name("k1"), e.name("k2"), e.name("k3")
	a, c := token.New(), token.New()
	e.begin(k1, "fp", a, 10*time.Second)
	e.begin(k2, "fp", c, 10*time.Second)
	e.finish(store.FinishIdempotent{Key: k2, OwnerToken: c, Result: []byte("r"), ResultTTL: 10 * time.Second})
	_, err := e.s.BeginIdempotent(e.ctx, store.BeginIdempotent{Key: k3, Fingerprint: "fp", OwnerToken: token.New(), ProcessingTTL: 5 * time.Second, Retention: 5 * time.Second})
	noErr(e, "Begin", err)
	e.advance(10 * time.Second)
	err = e.s.FinishIdempotent(e.ctx, store.FinishIdempotent{Key: k1, OwnerToken: a, Result: []byte("late"), ResultTTL: time.Hour})
	isErr(e, "Finish at the processing deadline", err, store.ErrNotOwner)
	_, err = e.s.ExtendIdempotent(e.ctx, k1, a, time.Minute)
	isErr(e, "Extend at the processing deadline", err, store.ErrNotOwner)
	b := token.New()
	e.wantIdem("begin at the processing deadline", e.begin(k1, "fp", b, 10*time.Second), executing(b, e.now().Add(10*time.Second), 10*time.Second))
	d := token.New()
	e.wantIdem("begin at the result's ExpireTime", e.begin(k2, "other", d, 10*time.Second), executing(d, e.now().Add(10*time.Second), 10*time.Second))
	f := token.New()
	e.wantIdem("begin at deadline + Retention", e.begin(k3, "other", f, 10*time.Second), executing(f, e.now().Add(10*time.Second), 10*time.Second))
}
