package redis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// Every kind of hold (a lock, exclusive or shared; a semaphore's permit; a
// leadership) is one state per (kind, name), in the name's hash slot
// (keys.hold), worked on by the hold scripts (lua/hold_*.lua), which share
// lua/hold_prelude.lua: clean-up, eligibility, targeted wake-ups, removing
// a holder, granting. Sessions renew, check and drop holds of every kind
// with lua/hold_session.lua (refreshHold, dropHold).

// refreshHold is the call that checks whether token still holds (kind,
// name) live and, if renew, extends it to deadline (µs, the session's),
// capped by its max hold and never shortened. decodeHoldSession reads it.
func (s *Store) refreshHold(kind store.HoldKind, name, token string, deadline int64, renew bool, keep time.Duration) call {
	mode := "check"
	if renew {
		mode = "renew"
	}
	args := s.holdArgs(kind, name)
	args.Keep = keep.Microseconds()
	return call{holdSession, s.keys.hold(kind, name), holdSessionArgs{args, token, deadline, mode}}
}

// dropHold is the call that deletes (kind, name) if token holds it, its
// session closing, and wakes its waiters if it was live (an election's
// drop is a resignation: logged, waking its observers). decodeHoldSession
// reads it.
func (s *Store) dropHold(kind store.HoldKind, name, token string) call {
	return call{holdSession, s.keys.hold(kind, name), holdSessionArgs{s.holdArgs(kind, name), token, 0, "drop"}}
}

// expireHold is the call that deletes (kind, name) if token holds it, its
// session having expired at deadline (µs): its lock-delay counts from
// then. It wakes whom that lets in.
func (s *Store) expireHold(kind store.HoldKind, name, token string, deadline int64) call {
	return call{holdSession, s.keys.hold(kind, name), holdSessionArgs{s.holdArgs(kind, name), token, deadline, "expire"}}
}

// holdArgs are the arguments every hold script starts with (after the
// time's), as lua/hold_prelude.lua uses them.
type holdArgs struct {
	Base    string `lua:"base"`        // the name's tag base: its channels are Base + a suffix
	Kind    string `lua:"kind"`        // lock, semaphore or election
	IdleTTL int64  `lua:"idleTTL,int"` // µs the fence counter outlives the last grant
	// Facts are what holdEval learnt from the sessions of holders a run
	// asked about: "token live deadline" triples ("": none).
	Facts string `lua:"factsArg"`
	// Keep is how long past a session-bound holder's deadline its keys
	// last, when the call grants or renews one (holdKeep; 0: no longer).
	Keep int64 `lua:"keepFor,int"`
}

// holdKeep is how long past its session's deadline a session-bound hold's
// keys last when its session renews it (or it is granted): the session
// renews its holds only as that horizon comes within two TTLs
// (session_refresh.lua), about every eight TTLs, so that a heartbeat is one
// script.
func holdKeep(ttl time.Duration) time.Duration { return 10 * ttl }

func (s *Store) holdArgs(kind store.HoldKind, name string) holdArgs {
	return holdArgs{Base: s.keys.holdBase(kind, name), Kind: string(kind), IdleTTL: s.idleTTL.Microseconds()}
}

// holdAcquireArgs are lua/hold_acquire.lua's.
type holdAcquireArgs struct {
	holdArgs
	Token           string `lua:"tok"`
	Owner           string `lua:"owner"`
	TTL             int64  `lua:"ttl,int"`             // µs
	MaxHold         int64  `lua:"maxHold,int"`         // µs; 0: none
	Session         string `lua:"ses"`                 // the session's ID; "": a plain lease
	SessionDeadline int64  `lua:"sessionDeadline,int"` // µs, with a session
	// TimeSeen is the highest server time µs this coordd has seen from a
	// grant (0: none): the fence floor when the clock is behind it.
	TimeSeen int64 `lua:"timeSeen,int"`
	// Full: the session holds as many holds as it may.
	Full       bool   `lua:"full,bool"`
	Shared     bool   `lua:"shared,bool"`    // a shared lock
	MaxHolders int    `lua:"maxHolders,int"` // a lock's most shared holders (0: no cap)
	Limit      int    `lua:"limit,int"`      // a semaphore's limit
	Ticket     string `lua:"ticket"`         // the request's ticket ("": it does not wait)
	Instance   string `lua:"instance"`       // the ticket's instance
	Lease      int64  `lua:"lease,int"`      // the ticket's lease µs
	Delay      int64  `lua:"delay,int"`      // the session's lock-delay µs (copied into the record)
	Value      string `lua:"value"`          // an election's value
}

// holdAcquireSoloArgs are lua/hold_acquire_solo.lua's: holdAcquireArgs'
// fields that a plain exclusive lock's request (no session, not shared)
// sets.
type holdAcquireSoloArgs struct {
	IdleTTL  int64  `lua:"idleTTL,int"`
	Token    string `lua:"tok"`
	Owner    string `lua:"owner"`
	TTL      int64  `lua:"ttl,int"`
	MaxHold  int64  `lua:"maxHold,int"`
	TimeSeen int64  `lua:"timeSeen,int"`
	Ticket   string `lua:"ticket"`
}

// holdReleaseSoloArgs are lua/hold_release_solo.lua's.
type holdReleaseSoloArgs struct {
	IdleTTL int64  `lua:"idleTTL,int"`
	Token   string `lua:"tok"`
}

// soloFirst returns run, but that its first call runs fast instead (a
// lock's solo script, lua/hold_*_solo.lua, which reads the lock's meta
// only: the uncontended case), and the call it is given only if fast
// answered SLOW. fast nil: run.
func soloFirst(fast *call, run func(call) *redis.Cmd) func(call) *redis.Cmd {
	if fast == nil {
		return run
	}
	return func(c call) *redis.Cmd {
		if f := fast; f != nil {
			fast = nil
			if cmd := run(*f); !isSlow(cmd) {
				return cmd
			}
		}
		return run(c)
	}
}

func isSlow(cmd *redis.Cmd) bool {
	v, err := cmd.Slice()
	if err != nil || len(v) == 0 {
		return false
	}
	code, ok := v[0].(int64)
	return ok && code == codeSlow
}

// holdRenewArgs are lua/hold_renew.lua's: the token and the new ttl µs.
type holdRenewArgs struct {
	holdArgs
	Token string `lua:"tok"`
	TTL   int64  `lua:"ttl,int"`
}

// holdReleaseArgs are lua/hold_release.lua's.
type holdReleaseArgs struct {
	holdArgs
	Token string `lua:"tok"`
	// Bound deletes a session-bound hold too (its session's entry is gone
	// already); otherwise such a hold is left for the caller to take out
	// of its session first.
	Bound    bool   `lua:"bound,bool"`
	Instance string `lua:"me"`           // the releasing instance ("": none, nothing is handed off)
	TimeSeen int64  `lua:"timeSeen,int"` // as holdAcquireArgs'
	// Ticket leaves the queue first ("": none): the abandoned request's,
	// so that no release hands it the hold later.
	Ticket string `lua:"ticket"`
}

// holdSessionArgs are lua/hold_session.lua's: the session's token for the
// hold, the session's deadline µs, and Mode: "renew", "check", "drop" or
// "expire" (the script says what each does).
type holdSessionArgs struct {
	holdArgs
	Token           string `lua:"tok"`
	SessionDeadline int64  `lua:"sessionDeadline,int"`
	Mode            string `lua:"mode"`
}

// holdLeaveArgs are lua/hold_leave.lua's: the ticket, the waiting
// request's token ("": none), the instance ("": none, nothing is handed
// off) and the highest server time it has seen (as holdAcquireArgs').
type holdLeaveArgs struct {
	holdArgs
	Ticket   string `lua:"ticket"`
	Token    string `lua:"tok"`
	Instance string `lua:"me"`
	TimeSeen int64  `lua:"timeSeen,int"`
}

// holdTicketsArgs are lua/hold_tickets.lua's: the lease µs, and the
// tickets (at most maxTicketsPerCall).
type holdTicketsArgs struct {
	holdArgs
	Lease   int64    `lua:"lease,int"`
	Tickets []string `lua:"tickets,rest"`
}

// holdCheckFenceArgs are lua/hold_check_fence.lua's.
type holdCheckFenceArgs struct {
	holdArgs
	Fence uint64 `lua:"fence,int"`
}

// evalHold runs a hold script on (kind, name) (holdEval).
func (s *Store) evalHold(ctx context.Context, sc *script, kind store.HoldKind, name string, args scriptArgs) *redis.Cmd {
	return s.holdEval(ctx, kind, name, call{sc, s.keys.hold(kind, name), args}, func(c call) *redis.Cmd {
		return s.eval(ctx, c.script, c.keys, c.args)
	})
}

// maxAskRounds bounds how often holdEval asks sessions for one call: a
// round settles every holder the script named (up to its clean-up batch),
// so more rounds are needed only when further holders' recorded deadlines
// pass meanwhile, or a name has more than a batch of them.
const maxAskRounds = 4

// errAskRounds: a hold script still asked about sessions after
// maxAskRounds; the call's outcome is unknown only in that nothing was
// done, and it may be tried again.
var errAskRounds = fmt.Errorf("%w: the holders' sessions could not all be asked in %d rounds", store.ErrUnavailable, maxAskRounds)

// holdEval runs c, a hold script on (kind, name), with run; while the
// script answers ASK (hold_prelude.lua's resolve: session-bound holders
// whose recorded deadline passed), it asks their sessions
// (session_vouch.lua, pipelined, each on its session's slot) and runs c
// again with what they said as facts. The reply is the first that is not
// an ASK.
func (s *Store) holdEval(ctx context.Context, kind store.HoldKind, name string, c call, run func(call) *redis.Cmd) *redis.Cmd {
	var facts strings.Builder
	facts.WriteString(reflect.ValueOf(c.args).FieldByName("Facts").String()) // what the caller knows already
	for round := 0; ; round++ {
		cmd := run(c)
		asks, ok := asksOf(cmd)
		if !ok {
			return cmd
		}
		if round+1 >= maxAskRounds {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(errAskRounds)
			return cmd
		}
		calls := make([]call, len(asks))
		for i, a := range asks {
			calls[i] = call{sessionVouch, s.keys.session(a.session)[:2], sessionVouchArgs{holdField(kind, name), a.token, false}}
		}
		for i, vc := range s.evalPipelined(ctx, calls) {
			live, deadline, err := decodeVouch(vc)
			if err != nil {
				cmd := redis.NewCmd(ctx)
				cmd.SetErr(err)
				return cmd
			}
			facts.WriteString(fact(asks[i].token, live, deadline))
		}
		c.args = withFacts(c.args, facts.String())
	}
}

// fact is what a hold script learns of holder token's session (its
// facts, hold_prelude.lua's resolve): whether the holder lives, and the
// session's deadline.
func fact(token string, live bool, deadline int64) string {
	bit := "0"
	if live {
		bit = "1"
	}
	return fmt.Sprintf("%s %s %d ", token, bit, deadline)
}

// ask is one holder an ASK names: its token and its session's ID.
type ask struct{ token, session string }

// asksOf reads an ASK reply's holders; ok false for any other reply.
func asksOf(cmd *redis.Cmd) ([]ask, bool) {
	v, err := cmd.Slice()
	if err != nil || len(v) < 3 || len(v)%2 != 1 {
		return nil, false
	}
	if code, isInt := v[0].(int64); !isInt || code != codeAsk {
		return nil, false
	}
	asks := make([]ask, 0, len(v)/2)
	for i := 1; i+1 < len(v); i += 2 {
		tok, ok1 := v[i].(string)
		ses, ok2 := v[i+1].(string)
		if !ok1 || !ok2 {
			return nil, false
		}
		asks = append(asks, ask{tok, ses})
	}
	return asks, true
}

// sessionVouchArgs are lua/session_vouch.lua's: the hold's field
// ("kind:name"), the holder's token, and whether the hold leaves the
// session's set (its own release).
type sessionVouchArgs struct {
	Field  string `lua:"field"`
	Token  string `lua:"tok"`
	Unbind bool   `lua:"unbind,bool"`
}

// decodeVouch reads session_vouch.lua's reply: whether the holder lives,
// and the session's deadline (0: unknown, or not the session's holder).
func decodeVouch(cmd *redis.Cmd) (live bool, deadline int64, err error) {
	r, err := replyOf(sessionVouch, cmd)
	if err != nil {
		return false, 0, err
	}
	live = r.code(codeOK, codeNo) == codeOK
	deadline = r.int(1)
	return live, deadline, r.done()
}

// withFacts returns a copy of args, a hold script's (a struct holding
// holdArgs), with its Facts set.
func withFacts(args scriptArgs, facts string) scriptArgs {
	v := reflect.New(reflect.TypeOf(args)).Elem()
	v.Set(reflect.ValueOf(args))
	v.FieldByName("Facts").SetString(facts)
	return v.Interface().(scriptArgs)
}

// decodeHoldSession reads hold_session.lua's reply to "renew" or "check"
// (drop false), or to "drop". at is when a renew or check found the hold
// not live (µs, the hold's node's time).
func decodeHoldSession(cmd *redis.Cmd, drop bool) (live bool, held time.Duration, at int64, err error) {
	r, err := replyOf(holdSession, cmd)
	if err != nil {
		return false, 0, 0, err
	}
	switch r.code(codeOK, codeNo) {
	case codeOK:
		if drop {
			held = micros(r.int(1))
		}
		live = true
	case codeNo:
		if !drop {
			at = r.int(1)
		}
	}
	return live, held, at, r.done()
}

// errBadKind: a request of a kind the method does not take (a caller's
// bug, never a client's input: the domain packages pass their own kind).
var errBadKind = errors.New("redis: a hold kind the method does not take")

// AcquireHold implements store.Holds.
func (s *Store) AcquireHold(ctx context.Context, req store.HoldRequest) (store.Grant, error) {
	if req.Kind == "" {
		req.Kind = store.HoldLock
	}
	if req.Kind != store.HoldLock && req.Kind != store.HoldSemaphore {
		return store.Grant{}, fmt.Errorf("%w: AcquireHold of %q", errBadKind, req.Kind)
	}
	return s.acquire(ctx, "AcquireHold", req)
}

// acquire is AcquireHold's work for every kind.
func (s *Store) acquire(ctx context.Context, op string, req store.HoldRequest) (store.Grant, error) {
	var g store.Grant
	err := s.do(ctx, op, s.keys.hold(req.Kind, req.Name)[0], func(ctx context.Context) (err error) {
		g, _, err = s.acquireOnce(ctx, req, nil)
		return err
	})
	if err != nil {
		return store.Grant{}, err
	}
	return g, nil
}

// acquireOnce grants a hold of req.Kind (an election's with value). A
// session-bound grant takes up to five steps over two slots: read the
// session's deadline (and its lock-delay); grant the hold until then; add
// it to the session's set as a pending binding, which fails if the
// session ended meanwhile (the hold is then released and the call is
// ErrSessionNotFound); confirm the binding; and, if a keepalive moved the
// session's deadline in between, renew the hold to it.
//
// Keepalives renew only confirmed bindings. If the add's or the confirm's
// reply is lost, the caller is told the outcome is uncertain and has no
// token, and a pending binding is never renewed: the hold ends at the
// deadline it was granted with (the domain packages also release it by its
// token), and the session reports it lost then.
func (s *Store) acquireOnce(ctx context.Context, req store.HoldRequest, value []byte) (store.Grant, acquired, error) {
	var sessDeadline, delay int64
	var keep time.Duration
	full := false // the session is at its cap: only a hold it has is answered
	if req.SessionID != "" {
		dl, taken, d, ttl, err := s.sessionCap(ctx, req.SessionID)
		if err != nil {
			return store.Grant{}, acquired{}, err
		}
		full = req.MaxSessionHolds > 0 && taken >= int64(req.MaxSessionHolds)
		sessDeadline, delay, keep = dl, d, holdKeep(micros(ttl))
	}
	hargs := s.holdArgs(req.Kind, req.Name)
	hargs.Keep = keep.Microseconds()
	var ticket, instance string
	var lease int64
	if req.Wait != nil {
		ticket, instance, lease = req.Wait.Ticket, req.Wait.Instance, req.Wait.Lease.Microseconds()
	}
	var replicated bool
	keys, timeSeen := s.keys.hold(req.Kind, req.Name), s.timeSeen.Load()
	var fast *call
	if req.Kind == store.HoldLock && !req.Shared && req.SessionID == "" {
		fast = &call{holdAcquireSolo, keys[holdMeta : holdMeta+1], holdAcquireSoloArgs{hargs.IdleTTL, req.Token, req.Owner,
			req.TTL.Microseconds(), req.MaxHold.Microseconds(), timeSeen, ticket}}
	}
	cmd := s.holdEval(ctx, req.Kind, req.Name, call{holdAcquire, keys, holdAcquireArgs{
		holdArgs: hargs, Token: req.Token, Owner: req.Owner,
		TTL: req.TTL.Microseconds(), MaxHold: req.MaxHold.Microseconds(), Session: req.SessionID, SessionDeadline: sessDeadline,
		TimeSeen: timeSeen, Full: full, Shared: req.Shared, MaxHolders: req.MaxHolders, Limit: req.Limit,
		Ticket: ticket, Instance: instance, Lease: lease, Delay: delay, Value: string(value),
	}}, soloFirst(fast, func(c call) *redis.Cmd {
		cmd, rep := s.evalReplicated(ctx, c.script, c.keys, c.args)
		replicated = rep
		return cmd
	}))
	a, err := decodeAcquire(cmd, req.Kind == store.HoldElection)
	if err != nil {
		return store.Grant{}, a, err
	}
	switch a.code {
	case codeOK, codeNo:
		s.sawTime(a.now)
	}
	switch a.code {
	case codeSessionGone:
		return store.Grant{}, a, store.ErrSessionNotFound
	case codeAlreadyHeld:
		// The session's own hold lives until the session's deadline (read
		// just before), capped by its max hold; its record knows the former
		// only as of its last renewal.
		dl := boundHold{req.SessionID, a.hold}.until(a.deadline, sessDeadline)
		return store.Grant{Acquired: true, AlreadyHeld: true, Token: a.token, Fence: a.fence,
			TTL: micros(dl - a.now), ExpireTime: unixMicro(dl)}, a, nil
	case codeFull:
		return store.Grant{}, a, store.ErrTooManyHolds
	case codeLimitMismatch:
		return store.Grant{}, a, store.ErrLimitMismatch
	case codeTooManyWaiters:
		return store.Grant{}, a, store.ErrTooManyWaiters
	case codeNo:
		if a.holderHold.session != "" && a.deadline > 0 {
			// A session-bound holder lives until its session's deadline.
			dls, err := s.sessionDeadlines(ctx, []string{a.holderHold.session})
			if err != nil {
				return store.Grant{}, a, err
			}
			// A session that ended since leaves its last deadline, passed
			// or about to: never a negative TTL.
			dl := max(a.holderHold.until(a.deadline, dls[a.holderHold.session]), a.now)
			if a.retry == a.deadline {
				a.retry = dl
			}
			a.deadline = dl
		}
		g := store.Grant{Holder: a.holder, Queued: a.queued, Holders: a.holders, Limit: a.limit}
		if a.deadline > 0 {
			g.TTL, g.ExpireTime = micros(a.deadline-a.now), unixMicro(a.deadline)
		}
		if a.retry > 0 {
			g.RetryAt = unixMicro(a.retry)
		}
		return g, a, nil
	}
	if !replicated {
		return store.Grant{}, a, errNotReplicated // the caller releases it by its token
	}
	dl, now := a.deadline, a.now
	g := store.Grant{Acquired: true, Fence: a.fence, TTL: micros(dl - now), ExpireTime: unixMicro(dl),
		Holders: a.holders, Limit: a.limit}
	if req.SessionID == "" {
		return g, a, nil
	}
	var hold int64
	if req.MaxHold > 0 {
		hold = now + req.MaxHold.Microseconds()
	}
	h := sessionHold{kind: req.Kind, name: req.Name,
		sessionEntry: sessionEntry{token: req.Token, fence: a.fence, holdUntil: hold, pending: true}}
	_, replicated, err = s.bindHold(ctx, req.SessionID, h, req.MaxSessionHolds)
	if errors.Is(err, store.ErrSessionNotFound) || errors.Is(err, store.ErrTooManyHolds) {
		// The session ended, or filled up, since it was read: undo the grant.
		if _, err := s.release(ctx, req.Kind, req.Name, req.Token, true, "", "", ""); err != nil {
			return store.Grant{}, a, err
		}
		return store.Grant{}, a, err
	}
	if err != nil {
		return store.Grant{}, a, err
	}
	if !replicated {
		return store.Grant{}, a, errNotReplicated // a failover could lose the entry, and the hold with it
	}
	h.pending = false
	newDeadline, replicated, err := s.confirmHold(ctx, req.SessionID, h, sessDeadline+keep.Microseconds())
	if errors.Is(err, store.ErrSessionNotFound) {
		// The session ended, or lost the hold, since the add.
		if _, err := s.release(ctx, req.Kind, req.Name, req.Token, true, "", "", ""); err != nil {
			return store.Grant{}, a, err
		}
		return store.Grant{}, a, err
	}
	if err != nil {
		return store.Grant{}, a, err
	}
	if !replicated {
		return store.Grant{}, a, errNotReplicated
	}
	if newDeadline > dl && (hold == 0 || hold > dl) {
		// A keepalive renewed the session between the read and the add,
		// without this hold: extend it to the session's deadline (an
		// extension only, so a later keepalive is never undone).
		held, _, _, err := decodeHoldSession(s.evalHold(ctx, holdSession, req.Kind, req.Name, holdSessionArgs{hargs, req.Token, newDeadline, "renew"}), false)
		if err != nil {
			return store.Grant{}, a, err
		}
		if !held {
			// Its lease ran out before it could be extended: it is gone.
			_, _, _ = s.unbindHold(ctx, req.SessionID, req.Kind, req.Name, req.Token)
			return store.Grant{}, a, errLostInFlight
		}
		dl = newDeadline
		if hold > 0 && hold < dl {
			dl = hold
		}
		g.TTL, g.ExpireTime = micros(dl-now), unixMicro(dl)
		a.deadline = dl
	}
	return g, a, nil
}

// acquired is hold_acquire.lua's reply.
type acquired struct {
	code          int64 // codeOK, codeNo, codeSessionGone, codeAlreadyHeld, codeFull, codeLimitMismatch, codeTooManyWaiters
	token, holder string
	fence         uint64
	deadline, now int64
	retry         int64 // codeNo: when the state may change by itself (0: only a wake-up)
	hold          int64 // codeAlreadyHeld: the hold's max hold µs (0: none)
	queued        bool
	holders       int
	limit         int
	leader        store.LeaderInfo // codeNo, an election's
	leaderHold    boundHold        // its session and max hold (leaderLives)
	holderHold    boundHold        // codeNo: the holder's session and max hold
}

// decodeAcquire reads hold_acquire.lua's reply; election: with the
// leader (not granted).
func decodeAcquire(cmd *redis.Cmd, election bool) (acquired, error) {
	r, err := replyOf(holdAcquire, cmd)
	if err != nil {
		return acquired{}, err
	}
	a := acquired{code: r.code(codeOK, codeNo, codeSessionGone, codeAlreadyHeld, codeFull, codeLimitMismatch, codeTooManyWaiters)}
	switch a.code {
	case codeOK:
		a.fence, a.deadline, a.now, a.holders, a.limit = r.uint(1), r.int(2), r.int(3), int(r.int(4)), int(r.int(5))
	case codeNo:
		a.holder, a.deadline, a.now, a.retry = r.str(1), r.int(2), r.int(3), r.int(4)
		a.queued, a.holders, a.limit = r.int(5) == 1, int(r.int(6)), int(r.int(7))
		a.holderHold = boundHold{session: r.str(8), hold: r.int(9)}
		if election {
			a.leader, a.leaderHold = decodeLeader(r, 10)
		}
	case codeAlreadyHeld:
		a.token, a.fence, a.deadline, a.now, a.hold = r.str(1), r.uint(2), r.int(3), r.int(4), r.int(5)
	case codeLimitMismatch:
		a.limit = int(r.int(1))
	}
	return a, r.done()
}

// decodeLeader reads leaderInfo's eight values (lua/hold_prelude.lua)
// from value from: the leader, and its session's ID and max hold (µs, 0:
// none), for leaderLives.
func decodeLeader(r *reply, from int) (store.LeaderInfo, boundHold) {
	has, value, fence, elected, dl, rev := r.int(from), r.str(from+1), r.uint(from+2), r.int(from+3), r.int(from+4), r.uint(from+5)
	lh := boundHold{session: r.str(from + 6), hold: r.int(from + 7)}
	l := store.LeaderInfo{Rev: rev}
	if has == 1 {
		l.HasLeader, l.Value, l.Fence, l.ElectTime, l.ExpireTime = true, []byte(value), fence, unixMicro(elected), unixMicro(dl)
	}
	return l, lh
}

// boundHold is a holder's session ("": none) and max hold (µs, 0: none),
// as a script's reply tells them.
type boundHold struct {
	session string
	hold    int64
}

// until is when a session-bound holder whose record says recorded ends:
// at its session's deadline sessionDeadline, which its record knows only as
// of its last renewal, capped by its max hold.
func (h boundHold) until(recorded, sessionDeadline int64) int64 {
	dl := max(recorded, sessionDeadline)
	if h.hold > 0 {
		dl = min(dl, h.hold)
	}
	return dl
}

// leaderLives gives a session-bound leader its session's deadline (capped
// by its max hold): its record knows that only as of its last renewal. A
// leader whose session ended since the script read it stays the answer
// (sessionDeadlines), with its session's last deadline.
func (s *Store) leaderLives(ctx context.Context, l *store.LeaderInfo, lh boundHold) error {
	if !l.HasLeader || lh.session == "" {
		return nil
	}
	dls, err := s.sessionDeadlines(ctx, []string{lh.session})
	if err != nil {
		return err
	}
	l.ExpireTime = unixMicro(lh.until(l.ExpireTime.UnixMicro(), dls[lh.session]))
	return nil
}

// sawTime raises timeSeen to now. Fences are max(counter + 1, server time)
// (lua/hold_prelude.lua's grant): after a failover that lost the last
// increments, only the clock keeps them above the fences the old master
// issued, and a promoted node whose clock is behind the old master's by
// more than the failover took would issue smaller ones. The acquire script
// floors its fence at timeSeen + 1 when its clock is behind timeSeen, so
// that this coordd's fences never go backwards (as far as the grants it saw
// go: fences another instance got from the old master after this one last
// heard from it are not covered).
func (s *Store) sawTime(now int64) {
	for {
		seen := s.timeSeen.Load()
		if now <= seen || s.timeSeen.CompareAndSwap(seen, now) {
			return
		}
	}
}

// errLostInFlight: a session-bound hold was granted, but its lease ran out
// before it was bound to the session's: the caller must not believe it
// holds it. Rare (the session was about to expire, and a keepalive raced the
// acquire); reported as an uncertain outcome, to be retried.
var errLostInFlight = fmt.Errorf("%w: the hold's lease ran out while it was being bound to its session", store.ErrUnavailable)

// RenewHold implements store.Holds.
func (s *Store) RenewHold(ctx context.Context, kind store.HoldKind, name, token string, ttl time.Duration) (store.Lease, error) {
	return s.renewHold(ctx, "RenewHold", kind, name, token, ttl)
}

func (s *Store) renewHold(ctx context.Context, op string, kind store.HoldKind, name, token string, ttl time.Duration) (store.Lease, error) {
	var l store.Lease
	err := s.do(ctx, op, s.keys.hold(kind, name)[0], func(ctx context.Context) (err error) {
		l, err = decodeRenew(s.evalHold(ctx, holdRenew, kind, name, holdRenewArgs{s.holdArgs(kind, name), token, ttl.Microseconds()}))
		return err
	})
	return l, err
}

// decodeRenew reads hold_renew.lua's reply.
func decodeRenew(cmd *redis.Cmd) (store.Lease, error) {
	r, err := replyOf(holdRenew, cmd)
	if err != nil {
		return store.Lease{}, err
	}
	switch r.code(codeOK, codeNo, codeSessionBound) {
	case codeNo:
		return store.Lease{}, store.ErrNotHeld
	case codeSessionBound:
		return store.Lease{}, store.ErrSessionBound
	case codeBad:
		return store.Lease{}, r.done()
	}
	dl, fence, now := r.int(1), r.uint(2), r.int(3)
	return store.Lease{TTL: micros(dl - now), ExpireTime: unixMicro(dl), Fence: fence}, r.done()
}

// ReleaseHold implements store.Holds. With redis.wait_replicas set,
// nothing is handed off (the release wakes the instance's waiters too):
// a grant is only answered once WAIT has seen it replicated, which the
// acquire path does.
func (s *Store) ReleaseHold(ctx context.Context, kind store.HoldKind, name, token, instance string) (store.Released, error) {
	if s.wait > 0 {
		instance = ""
	}
	return s.releaseHold(ctx, "ReleaseHold", kind, name, token, instance)
}

// releaseHold: a session-bound hold leaves its session's set first and is
// deleted second, so that a keepalive in between never reports it lost.
func (s *Store) releaseHold(ctx context.Context, op string, kind store.HoldKind, name, token, instance string) (store.Released, error) {
	var rel released
	err := s.do(ctx, op, s.keys.hold(kind, name)[0], func(ctx context.Context) (err error) {
		if rel, err = s.release(ctx, kind, name, token, false, instance, "", ""); err != nil || rel.code != codeSessionBound {
			return err
		}
		// The hold leaves its session's set with the session's word on it
		// (live, or expired then), which is the fact the release decides
		// by if the holder's recorded deadline has passed: asked after the
		// hold left the set, the session would say it holds nothing.
		live, deadline, err := s.unbindHold(ctx, rel.session, kind, name, token)
		if err != nil {
			return err
		}
		rel, err = s.release(ctx, kind, name, token, true, instance, "", fact(token, live, deadline))
		return err
	})
	if err != nil {
		return store.Released{}, err
	}
	return store.Released{Released: rel.code == codeOK, Held: rel.held, Handoffs: rel.handoffs}, nil
}

// AbandonHold implements store.Holds.
func (s *Store) AbandonHold(ctx context.Context, kind store.HoldKind, name, token, ticket string) error {
	return s.abandonHold(ctx, "AbandonHold", kind, name, token, ticket)
}

// abandonHold: the ticket leaves the queue and a lease is released, in
// one script; a session-bound hold's binding first becomes a loss report
// (waking the session's stream), then the hold is deleted.
func (s *Store) abandonHold(ctx context.Context, op string, kind store.HoldKind, name, token, ticket string) error {
	return s.do(ctx, op, s.keys.hold(kind, name)[0], func(ctx context.Context) error {
		rel, err := s.release(ctx, kind, name, token, false, "", ticket, "")
		if err != nil || rel.code != codeSessionBound {
			return err // released, or not held
		}
		if err := s.holdGone(ctx, rel.session, kind, name, token); err != nil {
			return err
		}
		_, err = s.release(ctx, kind, name, token, true, "", "", "")
		return err
	})
}

// release runs hold_release.lua: it takes ticket ("": none) out of the
// queue, deletes (kind, name)'s hold by token if live, and lets in whom
// that lets in (instance's plain tickets are handed off); a session-bound
// one only if bound (its session's entry is gone), else it is answered
// codeSessionBound.
func (s *Store) release(ctx context.Context, kind store.HoldKind, name, token string, bound bool, instance, ticket, facts string) (released, error) {
	keys, hargs := s.keys.hold(kind, name), s.holdArgs(kind, name)
	hargs.Facts = facts
	var fast *call
	if kind == store.HoldLock && ticket == "" {
		fast = &call{holdReleaseSolo, keys[holdMeta : holdMeta+1], holdReleaseSoloArgs{s.idleTTL.Microseconds(), token}}
	}
	rel, err := decodeRelease(s.holdEval(ctx, kind, name,
		call{holdRelease, keys, holdReleaseArgs{hargs, token, bound, instance, s.timeSeen.Load(), ticket}},
		soloFirst(fast, func(c call) *redis.Cmd { return s.eval(ctx, c.script, c.keys, c.args) })))
	if err == nil && len(rel.handoffs) > 0 {
		s.sawTime(rel.now)
	}
	return rel, err
}

// released is hold_release.lua's reply.
type released struct {
	code     int64         // codeOK, codeNo or codeSessionBound
	held     time.Duration // codeOK: how long it had been held
	session  string        // codeSessionBound: the session's ID
	now      int64         // codeOK, codeNo: the script's time (µs)
	handoffs []store.Handoff
}

func decodeRelease(cmd *redis.Cmd) (released, error) {
	r, err := replyOf(holdRelease, cmd)
	if err != nil {
		return released{}, err
	}
	rel := released{code: r.code(codeOK, codeNo, codeSessionBound)}
	switch rel.code {
	case codeOK:
		rel.held = micros(r.int(1))
		rel.now, rel.handoffs = decodeHandoffs(r, 2)
	case codeNo:
		rel.now, rel.handoffs = decodeHandoffs(r, 1)
	case codeSessionBound:
		rel.session = r.str(1)
	}
	return rel, r.done()
}

// decodeHandoffs reads hold_prelude.lua's withHandoffs values from value
// from: the script's time, their number, then each hand-off's ticket,
// token, fence, deadline, holders and limit.
func decodeHandoffs(r *reply, from int) (now int64, hs []store.Handoff) {
	now, n := r.int(from), r.int(from+1)
	if n < 0 || r.len() != from+2+6*int(n) {
		r.fail(from+1, "%d hand-offs in %d values", n, r.len())
		return now, nil
	}
	for i := from + 2; i < r.len(); i += 6 {
		dl := r.int(i + 3)
		g := store.Grant{Acquired: true, Fence: r.uint(i + 2), TTL: micros(dl - now), ExpireTime: unixMicro(dl),
			Holders: int(r.int(i + 4)), Limit: int(r.int(i + 5))}
		hs = append(hs, store.Handoff{Ticket: r.str(i), Token: r.str(i + 1), Grant: g})
	}
	return now, hs
}

// GetHolds implements store.Holds.
func (s *Store) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	return s.getHolds(ctx, "GetHolds", kind, name)
}

func (s *Store) getHolds(ctx context.Context, op string, kind store.HoldKind, name string) (store.HoldInfo, error) {
	var info store.HoldInfo
	err := s.do(ctx, op, s.keys.hold(kind, name)[0], func(ctx context.Context) error {
		g, err := decodeGet(s.evalHold(ctx, holdGet, kind, name, s.holdArgs(kind, name)))
		if err != nil {
			return err
		}
		// A session-bound holder lives until its session's deadline (capped
		// by its max hold), which its record knows only as of its last
		// renewal: the session tells (a holder whose session ended since
		// is not reported).
		var ids []string
		for _, h := range g.holders {
			if h.session != "" {
				ids = append(ids, h.session)
			}
		}
		dls, err := s.sessionDeadlines(ctx, ids)
		if err != nil {
			return err
		}
		info = store.HoldInfo{Waiters: g.waiters, Limit: g.limit}
		for _, h := range g.holders {
			dl := h.deadline
			if h.session != "" {
				// Live when the script ran, whatever its session did since.
				dl = max(boundHold{h.session, h.hold}.until(dl, dls[h.session]), g.now)
			}
			info.Holders = append(info.Holders, store.HolderInfo{
				Fence: h.fence, Shared: h.shared, SessionBound: h.session != "",
				TTL: micros(dl - g.now), ExpireTime: unixMicro(dl), AcquireTime: unixMicro(h.acquired), Owner: h.owner,
			})
		}
		slices.SortFunc(info.Holders, func(a, b store.HolderInfo) int {
			switch {
			case a.Fence < b.Fence:
				return -1
			case a.Fence > b.Fence:
				return 1
			}
			return 0
		})
		if len(info.Holders) > 0 {
			h := info.Holders[0]
			info.Held, info.Owner, info.Fence, info.SessionBound = true, h.Owner, h.Fence, h.SessionBound
			info.TTL, info.ExpireTime, info.AcquireTime = h.TTL, h.ExpireTime, h.AcquireTime
		}
		return nil
	})
	return info, err
}

// sessionDeadlines reads the deadlines (µs) of the sessions ids, one
// pipelined script each (session_lives.lua): a live one's (a session being
// closed included: its holds live until the close drops them), or an ended
// one's last (0 if it is unknown by now).
//
// A script that read a session-bound holder as live (holdEval) settled
// that for the instant it ran: what is read here, later, only tells how
// long it lived or lives, and a session that has ended since takes the
// holder out of nothing the script answered (that would describe a state
// the name was never in, e.g. with the tickets queued before the expiry
// but without the holder).
func (s *Store) sessionDeadlines(ctx context.Context, ids []string) (map[string]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	calls := make([]call, len(ids))
	for i, id := range ids {
		calls[i] = call{sessionLives, s.keys.session(id)[:1], noArgs{}}
	}
	out := make(map[string]int64, len(ids))
	for i, cmd := range s.evalPipelined(ctx, calls) {
		r, err := replyOf(sessionLives, cmd)
		if err != nil {
			return nil, err
		}
		r.code(codeOK, codeNo)
		out[ids[i]] = r.int(1)
		if err := r.done(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// got is hold_get.lua's reply.
type got struct {
	now            int64
	waiters, limit int
	holders        []gotHolder
}

type gotHolder struct {
	fence          uint64
	shared         bool
	session        string // "": a plain lease
	deadline, hold int64  // µs; hold 0: no max hold
	acquired       int64
	owner          string
}

// decodeGet reads hold_get.lua's reply.
func decodeGet(cmd *redis.Cmd) (got, error) {
	r, err := replyOf(holdGet, cmd)
	if err != nil {
		return got{}, err
	}
	r.code(codeOK)
	g := got{now: r.int(1), waiters: int(r.int(2)), limit: int(r.int(3))}
	if err := r.done(); err != nil {
		return got{}, err
	}
	const per = 7
	if (r.len()-4)%per != 0 {
		return got{}, fmt.Errorf("%w: %s's reply: %d values for holders of %d", errCorrupt, holdGet.name, r.len()-4, per)
	}
	for i := 4; i+per-1 < r.len(); i += per {
		g.holders = append(g.holders, gotHolder{
			fence: r.uint(i), shared: r.int(i+1) == 1, session: r.str(i + 2), deadline: r.int(i + 3), hold: r.int(i + 4),
			acquired: r.int(i + 5), owner: r.str(i + 6),
		})
	}
	return g, r.done()
}

// LeaveQueue implements store.Holds (with redis.wait_replicas set, as
// ReleaseHold, nothing is handed off).
func (s *Store) LeaveQueue(ctx context.Context, kind store.HoldKind, name, ticket, token, instance string) ([]store.Handoff, error) {
	if s.wait > 0 {
		instance = ""
	}
	var hs []store.Handoff
	err := s.do(ctx, "LeaveQueue", s.keys.hold(kind, name)[0], func(ctx context.Context) error {
		now, h, err := decodeLeave(s.evalHold(ctx, holdLeave, kind, name, holdLeaveArgs{s.holdArgs(kind, name), ticket, token, instance, s.timeSeen.Load()}))
		if err == nil && len(h) > 0 {
			s.sawTime(now)
		}
		hs = h
		return err
	})
	if err != nil {
		return nil, err
	}
	return hs, nil
}

// decodeLeave reads hold_leave.lua's reply: the script's time and its
// hand-offs.
func decodeLeave(cmd *redis.Cmd) (now int64, hs []store.Handoff, err error) {
	r, err := replyOf(holdLeave, cmd)
	if err != nil {
		return 0, nil, err
	}
	r.code(codeOK)
	now, hs = decodeHandoffs(r, 1)
	return now, hs, r.done()
}

// maxTicketsPerCall bounds hold_tickets.lua's work: RefreshTickets splits
// longer lists.
const maxTicketsPerCall = 1000

// RefreshTickets implements store.Holds, in calls of at most
// maxTicketsPerCall tickets.
func (s *Store) RefreshTickets(ctx context.Context, kind store.HoldKind, name string, tickets []string, lease time.Duration) ([]string, error) {
	var gone []string
	err := s.do(ctx, "RefreshTickets", s.keys.hold(kind, name)[0], func(ctx context.Context) error {
		gone = nil
		rest := tickets
		for first := true; first || len(rest) > 0; first = false {
			n := min(len(rest), maxTicketsPerCall)
			g, err := decodeTickets(s.evalHold(ctx, holdTickets, kind, name, holdTicketsArgs{s.holdArgs(kind, name), lease.Microseconds(), rest[:n]}))
			if err != nil {
				return err
			}
			gone = append(gone, g...)
			rest = rest[n:]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(gone) == 0 {
		return nil, nil
	}
	return gone, nil
}

// decodeTickets reads hold_tickets.lua's reply: the tickets gone.
func decodeTickets(cmd *redis.Cmd) ([]string, error) {
	r, err := replyOf(holdTickets, cmd)
	if err != nil {
		return nil, err
	}
	gone := make([]string, r.len())
	for i := range gone {
		gone[i] = r.str(i)
	}
	return gone, r.done()
}

// CheckFence implements store.Holds.
func (s *Store) CheckFence(ctx context.Context, kind store.HoldKind, name string, fence uint64) (bool, error) {
	var ok bool
	err := s.do(ctx, "CheckFence", s.keys.hold(kind, name)[0], func(ctx context.Context) error {
		c, err := codeOf(holdCheckFence, s.evalHold(ctx, holdCheckFence, kind, name, holdCheckFenceArgs{s.holdArgs(kind, name), fence}), codeOK, codeNo)
		ok = c == codeOK
		return err
	})
	return ok, err
}
