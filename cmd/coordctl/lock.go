package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

var lockSpec = &commandSpec{
	name:     "lock",
	synopsis: "lock NAME [--shared | --limit N] [--ttl D] [--wait D] [--max-wait D] [--owner LABEL] [--max-hold D] [--fail-if-held] [--grace D] -- CMD [ARGS...]",
	summary:  "run a command while holding a lock",
	help: `Runs CMD while holding lock NAME. The lock is bound to a session that
coordctl keeps alive with a heartbeat every --ttl/3. When CMD exits,
coordctl ends the session, which releases the lock at once, and exits with
CMD's status.

If someone else holds the lock, coordctl exits 75 at once, naming the holder;
with --wait it first waits up to that long for the lock. Waiters are granted
in arrival order. coordd bounds the wait of one call (limits.max_wait, 1m by
default; tell coordctl a higher one with --max-wait): a longer --wait waits
again, printing "waiting for NAME, held by OWNER" to stderr each time.

With --shared the lock is a shared (read) lock: shared holders of NAME
coexist, an exclusive (default) one excludes all others, and a waiting
exclusive request goes before shared requests that came after it.

With --limit N, NAME is a semaphore of N permits instead of a lock: up to N
commands run at once, each with a permit of its own (and its own fence). All
users of a semaphore must give the same N while it has holders or waiters
(else FAILED_PRECONDITION LIMIT_MISMATCH).

Against a coordd in Redlock mode (redis.mode redlock), which serves
exclusive locks without sessions only, coordctl finds the session refused
(FAILED_PRECONDITION REDLOCK_MODE) and holds the lock as a plain lease
instead: taken with a ttl of --ttl, renewed by coordctl with Renew every
--ttl/3, released with Release when CMD ends. Waiters are not queued in
this mode (README: Redlock mode). --shared and --limit need a session: in
this mode they fail (exit 1, naming REDLOCK_MODE).

CMD gets two variables: COORDD_FENCE, the lock's (or permit's) fencing
token, a number greater than every fence issued before for NAME, and
COORDD_LOCK_NAME. The lock's token is not passed on. Have what the lock protects reject a write
whose fence is lower than the last one it accepted: only that makes the lock
safe, because the lock is a lease.

A lost lease ends the command. coordctl sends CMD SIGTERM, then SIGKILL
after --grace, and exits 70, when while CMD runs:
  - coordd reports the session expired or the lock (with --limit: this
    semaphore's permit) lost;
  - --max-hold has passed since the lock was granted;
  - no heartbeat has been answered within --ttl of being sent: the stream
    broke and could not be resumed in time, or coordd stopped answering.
    coordctl then cannot know that it still holds the lock, so it counts it
    lost;
  - in Redlock mode: coordd answers a renewal LOCK_NOT_HELD, or the lease
    ends (the ttl of the last grant or renewal answered, from when it was
    sent) before a renewal is answered: a renewal that fails otherwise
    (UNAVAILABLE, no answer) is tried again but extends nothing.
From the loss until CMD exits, CMD runs without the lock: only the fence
protects the data from it.

Signals: SIGINT, SIGTERM and SIGHUP sent to coordctl are passed on to CMD,
and coordctl waits for CMD to exit. Unless coordctl runs in the foreground of
a terminal, CMD runs in a process group of its own, and these signals, like
those of a lost lease, reach every process in it. In the foreground of a
terminal CMD stays in coordctl's process group so that it can use the
terminal: Ctrl-C reaches it directly (coordctl passes on only SIGTERM), and a
lost lease signals CMD's own process only. If coordctl itself is killed, the
kernel kills CMD too (on Linux), and the lock is released when the session's
TTL (in Redlock mode, the lock's lease) runs out.

Exit status: CMD's (128+N if signal N killed it); 75 if the lock is held;
70 if the lease was lost; 127 if CMD was not found, 126 if it could not be
started; 69 if coordd is unavailable; 128+N if signal N came before CMD
started.

  coordctl lock --wait 30s db-migrate -- sh -c 'migrate --fence "$COORDD_FENCE"'`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &lockCmd{}
		var failIfHeld bool
		fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "the session's TTL: how long the lease outlives the last answered heartbeat (coordd bounds it: 1s to 5m by default); in Redlock mode, the lock's ttl, renewed every --ttl/3 (at most lock.max_ttl)")
		fs.BoolVar(&c.shared, "shared", false, "take a shared (read) lock: shared holders coexist, excluding exclusive ones")
		fs.Int32Var(&c.limit, "limit", 0, "take a permit of the semaphore NAME with N permits instead of a lock")
		fs.DurationVar(&c.wait, "wait", 0, "how long to wait for a held lock (0: do not wait, exit 75)")
		fs.DurationVar(&c.maxWait, "max-wait", 0, "coordd's limits.max_wait, the longest wait of one call; a longer --wait calls again (0: 1m, coordd's default; a lower limit is found by itself)")
		fs.StringVar(&c.owner, "owner", "", "a label for the holder, shown to others (default HOSTNAME:PID)")
		fs.DurationVar(&c.maxHold, "max-hold", 0, "end the command once the lock has been held this long (0: no limit)")
		fs.BoolVar(&failIfHeld, "fail-if-held", false, "exit 75 at once if the lock is held (the default; excludes --wait)")
		fs.DurationVar(&c.grace, "grace", 5*time.Second, "after a lost lease, the time between SIGTERM and SIGKILL")
		return func(fs *pflag.FlagSet) (command, error) {
			name, argv, err := nameAndCommand(fs, "lock")
			if err != nil {
				return nil, err
			}
			switch {
			case c.ttl <= 0:
				return nil, usagef("", "--ttl is %v; it must be positive", c.ttl)
			case c.wait < 0:
				return nil, usagef("", "--wait is %v; it must not be negative", c.wait)
			case failIfHeld && c.wait > 0:
				return nil, usagef("", "--fail-if-held and --wait %v exclude each other", c.wait)
			case c.shared && fs.Changed("limit"):
				return nil, usagef("", "--shared and --limit exclude each other: a semaphore's permits are all alike")
			case fs.Changed("limit") && c.limit < 1:
				return nil, usagef("", "--limit is %d; it must be at least 1", c.limit)
			case c.maxWait < 0:
				return nil, usagef("", "--max-wait is %v; it must not be negative", c.maxWait)
			case c.maxHold < 0:
				return nil, usagef("", "--max-hold is %v; it must not be negative", c.maxHold)
			case c.grace < 0:
				return nil, usagef("", "--grace is %v; it must not be negative", c.grace)
			}
			c.name, c.argv = name, argv
			return c, nil
		}
	},
}

type lockCmd struct {
	name    string
	shared  bool
	limit   int32 // > 0: a semaphore's permit
	ttl     time.Duration
	wait    time.Duration
	maxWait time.Duration // 0: defaultMaxWait
	owner   string        // "" means HOSTNAME:PID
	maxHold time.Duration
	grace   time.Duration
	argv    []string
}

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

func (c *lockCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	owner := c.owner
	if owner == "" {
		owner = defaultOwner()
	}
	j := &holdJob{
		what: "lock", kind: coordv1.HoldKind_HOLD_KIND_LOCK, name: c.name, ttl: c.ttl, wait: c.wait, maxWait: c.maxWait, maxHold: c.maxHold, grace: c.grace,
		argv: c.argv, env: []string{"COORDD_LOCK_NAME=" + c.name},
	}
	switch {
	case c.limit > 0:
		j.what, j.kind = "semaphore", coordv1.HoldKind_HOLD_KIND_SEMAPHORE
		j.try, j.needs = c.trySemaphore(conn, owner), "a semaphore (--limit)"
	case c.shared:
		j.try, j.needs = c.tryLock(conn, owner), "a shared lock (--shared)"
	default:
		j.try = c.tryLock(conn, owner)
		lc := coordv1.NewLockServiceClient(conn)
		j.renew = func(ctx context.Context, token string, ttl time.Duration) (time.Duration, error) {
			resp, err := lc.Renew(ctx, &coordv1.RenewRequest{Name: c.name, Token: token, Ttl: durationpb.New(ttl)})
			return resp.GetTtl().AsDuration(), err
		}
		j.release = func(ctx context.Context, token string) (bool, error) {
			resp, err := lc.Release(ctx, &coordv1.ReleaseRequest{Name: c.name, Token: token})
			return resp.GetReleased(), err
		}
	}
	return j.run(ctx, a, conn)
}

func (c *lockCmd) tryLock(conn *grpc.ClientConn, owner string) func(context.Context, string, time.Duration) (*attempt, error) {
	client := coordv1.NewLockServiceClient(conn)
	return func(ctx context.Context, sessionID string, wait time.Duration) (*attempt, error) {
		req := &coordv1.LockRequest{
			Name: c.name, SessionId: sessionID, Owner: owner, Shared: c.shared,
			Wait: optDuration(wait), MaxHold: optDuration(c.maxHold),
		}
		if sessionID == "" { // a plain lease (Redlock mode)
			req.Ttl = durationpb.New(c.ttl)
		}
		resp, err := client.Lock(ctx, req)
		if err != nil {
			return nil, err
		}
		att := &attempt{acquired: resp.GetAcquired(), token: resp.GetToken(), fence: resp.GetFence()}
		if att.acquired {
			att.ttl = resp.GetTtl().AsDuration()
		}
		if !att.acquired {
			resp.Token = "" // never shown; empty anyway when not acquired
			att.resp, att.blockedBy = resp, blocker(resp.GetHolder(), resp.GetTtl())
			att.held = fmt.Sprintf("lock %q is held by %s; its lease ends in %s", c.name, att.blockedBy, fmtDuration(resp.GetTtl()))
			if att.blockedBy == byWaiters {
				att.held = fmt.Sprintf("lock %q is not free: %s go first", c.name, byWaiters)
			}
		}
		return att, nil
	}
}

func (c *lockCmd) trySemaphore(conn *grpc.ClientConn, owner string) func(context.Context, string, time.Duration) (*attempt, error) {
	client := coordv1.NewSemaphoreServiceClient(conn)
	return func(ctx context.Context, sessionID string, wait time.Duration) (*attempt, error) {
		resp, err := client.Acquire(ctx, &coordv1.AcquireRequest{
			Name: c.name, Limit: c.limit, SessionId: sessionID, Owner: owner,
			Wait: optDuration(wait), MaxHold: optDuration(c.maxHold),
		})
		if err != nil {
			return nil, err
		}
		att := &attempt{acquired: resp.GetAcquired(), token: resp.GetToken(), fence: resp.GetFence()}
		if !att.acquired {
			resp.Token = ""
			att.resp, att.blockedBy = resp, blocker(resp.GetHolder(), resp.GetTtl())
			att.held = fmt.Sprintf("semaphore %q has no free permit (%d of %d held); the first to end is held by %s, whose lease ends in %s",
				c.name, resp.GetHolders(), resp.GetLimit(), att.blockedBy, fmtDuration(resp.GetTtl()))
			if att.blockedBy == byWaiters {
				att.held = fmt.Sprintf("semaphore %q has no free permit for this request: %s go first", c.name, byWaiters)
			}
		}
		return att, nil
	}
}

// byWaiters is who blocks a request that only waiters ahead of it block.
const byWaiters = "earlier waiters"

// blocker names who blocks a request, from a not-acquired answer: the
// holder whose lease ends first, or, if none (owner empty, no lease), the
// waiters ahead of it.
func blocker(owner string, ttl *durationpb.Duration) string {
	if owner == "" && ttl.AsDuration() == 0 {
		return byWaiters
	}
	return holderName(owner)
}
