package main

// The contention scenarios: --concurrency callers on one name, each looping
// acquire with wait → --hold → Release, so that at any time nearly every
// caller is waiting and each Release hands the name (or a permit) on. What
// they measure per grant, beside the usual per-cycle row:
//
//   - grants/s: acquisitions that succeeded, per second;
//   - store scripts per grant (with --redis): EVALSHA+EVAL run on every
//     master (INFO commandstats) during the measurement, over the grants;
//     the waiters' work (re-tries on wake-ups, polls) counts too, which is
//     the point: a herd shows as scripts per grant ≫ 1;
//   - hand-off latency: each grant is paired with the oldest Release call
//     not yet paired (FIFO); the hand-off is the time from that Release
//     call's start (at the releasing caller) to this grant's acquire call
//     returning acquired (at the new holder). With one holder at a time
//     (the lock) it is exactly how long the name lay idle between two
//     holders as the clients see it, the Release's trip to the server
//     included. The first grant(s), with no Release before them, have
//     none;
//   - wait: how long a granted acquire call took (its queueing included);
//   - the floor (lock-contention): right after the measurement, one caller
//     looping GetLock on the name, an RPC and a store script in series. A
//     grant after a release needs at least that much (the Release's trip to
//     coordd and its script, the grant's answer back), so grants/s can not
//     exceed the floor's rate on this machine, whatever coordd does.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// ContentionStats is what a contention scenario reports per grant.
type ContentionStats struct {
	Waiters          int      `json:"waiters"` // callers, all on one name
	Limit            int      `json:"limit"`   // holders at once: 1 for the lock
	Hold             string   `json:"hold"`
	Grants           int64    `json:"grants"`
	GrantsPerSec     float64  `json:"grants_per_sec"`
	ScriptsPerGrant  float64  `json:"scripts_per_grant,omitempty"`  // with --redis
	CommandsPerGrant float64  `json:"commands_per_grant,omitempty"` // with --redis: every command, those scripts ran included
	HandOff          *Latency `json:"hand_off,omitempty"`
	Wait             *Latency `json:"wait,omitempty"`
	// FloorPerSec is the floor's rate (lock-contention): one caller's
	// GetLock calls per second, each an RPC and a store script.
	FloorPerSec float64 `json:"floor_per_sec,omitempty"`
}

// contention records a contention scenario's grants and releases; safe for
// concurrent use.
type contention struct {
	mu      sync.Mutex
	pending []time.Time // Release calls not yet paired with a grant, oldest first
	handOff hist
	wait    hist
	grants  int64
}

// reset forgets everything (between the warm-up and the measurement).
func (c *contention) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending, c.handOff, c.wait, c.grants = nil, hist{}, hist{}, 0
}

// granted records a grant: its acquire call started at called and returned
// acquired at returned.
func (c *contention) granted(called, returned time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grants++
	c.wait.record(returned.Sub(called))
	if len(c.pending) > 0 {
		c.handOff.record(returned.Sub(c.pending[0]))
		c.pending = c.pending[1:]
	}
}

// releasing records a Release call about to start at t.
func (c *contention) releasing(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, t)
}

// stats sums up the measurement whose row is r.
func (c *contention) stats(r *Result, waiters, limit int, hold time.Duration) *ContentionStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &ContentionStats{Waiters: waiters, Limit: limit, Hold: hold.String(), Grants: c.grants}
	if r.Seconds > 0 {
		s.GrantsPerSec = float64(c.grants) / r.Seconds
	}
	if r.Redis != nil && c.grants > 0 {
		per := float64(r.Ops) / float64(c.grants) // the cost is per op; every op but a miss is a grant
		s.ScriptsPerGrant, s.CommandsPerGrant = r.Redis.ScriptsPerOp*per, r.Redis.CommandsPerOp*per
	}
	if c.handOff.total > 0 {
		l := c.handOff.summary()
		s.HandOff = &l
	}
	if c.wait.total > 0 {
		l := c.wait.summary()
		s.Wait = &l
	}
	return s
}

// contender is how one contention scenario acquires (with wait) and
// releases.
type contender struct {
	acquire func(ctx context.Context, w *worker) (token string, acquired bool, err error)
	release func(ctx context.Context, w *worker, token string) error
}

// runContention measures k's cycles on --concurrency callers: acquire,
// --hold, release. An acquire that gives up (its wait passed) is a miss.
func (b *bench) runContention(ctx context.Context, scenario string, limit int, k contender) *ContentionStats {
	b.contended = true
	c := &contention{}
	hold := b.cfg.Hold
	res := b.measureWith(ctx, scenario, tCoordd, b.cfg.CoorddPID, func(ctx context.Context, w *worker) error {
		t0 := time.Now()
		token, ok, err := k.acquire(ctx, w)
		if err != nil {
			return err
		}
		if !ok {
			w.misses++
			return nil
		}
		c.granted(t0, time.Now())
		if hold > 0 {
			time.Sleep(hold)
		}
		c.releasing(time.Now())
		return k.release(ctx, w, token)
	}, c.reset)
	if res == nil {
		return nil
	}
	res.Contention = c.stats(res, b.cfg.Concurrency, limit, hold)
	return res.Contention
}

// floorDuration is how long the floor is measured.
const floorDuration = 3 * time.Second

// floor measures one caller looping GetLock on name: calls per second
// (0 if any failed).
func (b *bench) floor(ctx context.Context, name string) float64 {
	op := func(ctx context.Context, _ *worker) error {
		_, err := b.cl.locks[0].GetLock(ctx, &coordv1.GetLockRequest{Name: name})
		return err
	}
	runLoop(ctx, 1, b.cfg.Warmup, op, b.seed^1)
	lr := runLoop(ctx, 1, floorDuration, op, b.seed)
	if lr.errs > 0 || lr.elapsed <= 0 {
		return 0
	}
	return float64(lr.h.total) / lr.elapsed.Seconds()
}

// runLockContention is lock-contention: every caller takes one name in
// turn, Lock with wait then Release (coordd only: the libraries poll).
func (b *bench) runLockContention(ctx context.Context) {
	name := "cb:contended:" + b.runID + b.nameTag()
	b.usedLocks = append(b.usedLocks, name)
	ttl, wait := durationpb.New(contentionTTL), durationpb.New(contentionWait)
	cs := b.runContention(ctx, "lock-contention", 1, contender{
		acquire: func(ctx context.Context, w *worker) (string, bool, error) {
			g, err := b.cl.locks[w.id%len(b.cl.locks)].Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: ttl, Wait: wait})
			return g.GetToken(), g.GetAcquired(), err
		},
		release: func(ctx context.Context, w *worker, token string) error {
			r, err := b.cl.locks[w.id%len(b.cl.locks)].Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: token})
			if err == nil && !r.GetReleased() {
				err = errNotReleased
			}
			return err
		},
	})
	if cs != nil {
		cs.FloorPerSec = b.floor(ctx, name)
		b.progress("  lock-contention floor (one caller, GetLock: an RPC and a script in series): %s/s", fmtInt(cs.FloorPerSec))
	}
}

// beforeAfter picks scenario's rows to compare: with --coordd-bin, the
// first binary's (before, if two or more ran) and the last one's (after);
// without, coordd's row (after) alone.
func (rep *Report) beforeAfter(scenario string) (before, after *Result) {
	var bins []*Result
	for _, r := range rep.Results {
		if r.Scenario != scenario {
			continue
		}
		switch {
		case r.Target == tCoordd:
			after = r
		case strings.HasPrefix(r.Target, tCoordd+"@"):
			bins = append(bins, r)
		}
	}
	if len(bins) > 0 {
		after = bins[len(bins)-1]
	}
	if len(bins) > 1 {
		before = bins[0]
	}
	return before, after
}

// The contention targets: waiting without a herd.
const (
	goalScripts   = "lock-contention (64 waiters, one name, Redis Cluster): store scripts per grant ≤ 3"
	goalGrants    = "lock-contention: grants/s ≥ 5× the before binary's (--coordd-bin, same run)"
	goalHandOff   = "lock-contention: hand-off p99 ≤ 10 ms"
	goalSemaphore = "semaphore-contention (64 callers, one name): reported, no threshold"
)

// contentionGoals evaluates the contention targets on lock-contention's
// rows (after: coordd's, or the last --coordd-bin binary's; before: the
// first binary's) and reports semaphore-contention's.
func (rep *Report) contentionGoals() {
	add := func(goal, status, measured string, v float64) {
		rep.Goals = append(rep.Goals, Goal{Set: setContention, Goal: goal, Status: status, Measured: measured, Value: v})
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	before, after := rep.beforeAfter("lock-contention")
	var why string
	switch {
	case after == nil || after.Contention == nil:
		why = "lock-contention not run"
	case rep.Config.Store != "redis" || rep.Config.RedisMode != "cluster":
		why = "needs coordd on the Redis Cluster, and --redis with its addresses"
	case after.Contention.Waiters != 64:
		why = fmt.Sprintf("run had %d waiters (--concurrency 64)", after.Contention.Waiters)
	}
	if why != "" {
		for _, g := range []string{goalScripts, goalGrants, goalHandOff} {
			add(g, "not measured", why, 0)
		}
	} else {
		a := after.Contention
		var b *ContentionStats
		if before != nil {
			b = before.Contention
		}
		was := func(f func(*ContentionStats) string) string {
			if b == nil {
				return ""
			}
			return " (" + before.Target + ": " + f(b) + ")"
		}
		if a.ScriptsPerGrant > 0 {
			add(goalScripts, met(a.ScriptsPerGrant <= 3),
				fmt.Sprintf("%.2f%s", a.ScriptsPerGrant, was(func(c *ContentionStats) string { return fmt.Sprintf("%.2f", c.ScriptsPerGrant) })),
				a.ScriptsPerGrant)
		} else {
			add(goalScripts, "not measured", "Redis's counters not read (--redis)", 0)
		}
		if r := ratio(a.GrantsPerSec, grantsPerSec(b)); r > 0 {
			m := fmt.Sprintf("%.2f× (%s/s vs %s/s)", r, fmtInt(a.GrantsPerSec), fmtInt(b.GrantsPerSec))
			if need := 5 * b.GrantsPerSec; r < 5 && a.FloorPerSec > 0 {
				m += fmt.Sprintf("; 5× is %s/s, the floor here %s/s", fmtInt(need), fmtInt(a.FloorPerSec))
			}
			add(goalGrants, met(r >= 5), m, r)
		} else {
			add(goalGrants, "not measured", "needs two binaries in one run: --coordd-bin before=PATH,after=PATH", 0)
		}
		if a.HandOff != nil {
			add(goalHandOff, met(a.HandOff.P99 <= 10_000),
				fmtUs(a.HandOff.P99)+was(func(c *ContentionStats) string {
					if c.HandOff == nil {
						return "-"
					}
					return fmtUs(c.HandOff.P99)
				}), a.HandOff.P99)
		} else {
			add(goalHandOff, "not measured", "no hand-off measured", 0)
		}
	}
	switch _, s := rep.beforeAfter("semaphore-contention"); {
	case s == nil || s.Contention == nil:
		add(goalSemaphore, "not measured", "semaphore-contention not run (or skipped: see above)", 0)
	default:
		c := s.Contention
		m := fmt.Sprintf("%s: limit %d, %s grants/s", s.Target, c.Limit, fmtInt(c.GrantsPerSec))
		if c.ScriptsPerGrant > 0 {
			m += fmt.Sprintf(", %.2f scripts/grant", c.ScriptsPerGrant)
		}
		if c.HandOff != nil {
			m += ", hand-off p99 " + fmtUs(c.HandOff.P99)
		}
		add(goalSemaphore, "reported", m, c.GrantsPerSec)
	}
}

func grantsPerSec(c *ContentionStats) float64 {
	if c == nil {
		return 0
	}
	return c.GrantsPerSec
}

// writeContention prints the contention scenarios' per-grant table and its
// legend.
func (rep *Report) writeContention(out io.Writer) {
	var rows []*Result
	for _, r := range rep.Results {
		if r.Contention != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\ncontention, per grant (all callers on one name, each looping acquire with wait → hold %s → Release):\n", rows[0].Contention.Hold)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\ttarget\tcallers\tlimit\tgrants\tgrants/s\tscripts/grant\tcommands/grant\thand-off p50\tp99\tp99.9\twait p50\tp99\t")
	lat := func(l *Latency) (p50, p99, p999 float64) {
		if l == nil {
			return 0, 0, 0
		}
		return l.P50, l.P99, l.P999
	}
	perGrant := func(v float64) string {
		if v <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, r := range rows {
		c := r.Contention
		h50, h99, h999 := lat(c.HandOff)
		w50, w99, _ := lat(c.Wait)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Target, c.Waiters, c.Limit, c.Grants,
			fmtInt(c.GrantsPerSec), perGrant(c.ScriptsPerGrant), perGrant(c.CommandsPerGrant),
			fmtUs(h50), fmtUs(h99), fmtUs(h999), fmtUs(w50), fmtUs(w99))
	}
	_ = tw.Flush()
	for _, r := range rows {
		if f := r.Contention.FloorPerSec; f > 0 {
			fmt.Fprintf(out, "  %s/%s floor: %s/s (one caller looping GetLock: an RPC and a store script in series, the least a\n"+
				"    grant after a release needs, so no grant rate here can exceed it)\n", r.Scenario, r.Target, fmtInt(f))
		}
	}
	fmt.Fprint(out, `  scripts/grant, commands/grant: EVALSHA+EVAL, and every command (those the scripts ran included), run by
    all masters during the measurement (INFO commandstats), over the grants: the waiters' re-tries count too.
  hand-off: each grant is paired with the oldest Release call not yet paired (FIFO); the time from that
    Release call's start (at the releasing caller) to the grant's acquire call returning acquired (at the
    new holder). With limit 1 it is how long the name lay idle between two holders, as clients see it.
  wait: how long a granted acquire call took, queueing included.
`)
}
