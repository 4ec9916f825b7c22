package main

// One-call commands for the RPCs `lock`, `elect` and the queue commands do
// not cover: renew, check-fence, get-semaphore, leader, extend, redrive and
// the idempotency key's begin, finish and extend. A token (a lock's, an
// idempotency key's owner token) is a secret: it comes from --token or
// $COORDCTL_TOKEN, never from an argument.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

const tokenHelp = `The token is read from $COORDCTL_TOKEN or --token (a flag's value is
visible to other users in ps; prefer the variable).`

// token returns --token (default $COORDCTL_TOKEN), or a usage error.
func (a *app) token(cmd string) (string, error) {
	if a.opts.token == "" {
		return "", usagef(cmd, "needs a token: set $COORDCTL_TOKEN (or --token, which ps shows)")
	}
	return a.opts.token, nil
}

var (
	checkFenceSpec = &commandSpec{
		name: "check-fence", synopsis: "check-fence NAME FENCE", summary: "say whether a fence is a live holder's",
		help: "Prints 'current' (exit 0) if FENCE is a live holder's of lock NAME, else 'not current' (exit 1).",
		setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
			return func(fs *pflag.FlagSet) (command, error) {
				if err := exactArgs(fs.Args(), "NAME", "FENCE"); err != nil {
					return nil, err
				}
				f, err := strconv.ParseUint(fs.Args()[1], 10, 64)
				if err != nil {
					return nil, usagef("", "FENCE %q is not a whole number", fs.Args()[1])
				}
				return &checkFenceCmd{name: fs.Args()[0], fence: f}, nil
			}
		},
	}
	getSemaphoreSpec = &commandSpec{
		name: "get-semaphore", synopsis: "get-semaphore NAME", summary: "show a semaphore's holders",
		help: "Prints semaphore NAME's limit, holders (owner, fence, remaining lease) and waiters. Never a token.",
		setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
			return nameArgs(func(a []string) command { return &getSemaphoreCmd{name: a[0]} }, "NAME")
		},
	}
	leaderSpec = &commandSpec{
		name: "leader", synopsis: "leader NAME", summary: "show an election's leader",
		help: "Prints election NAME's leader (value, fence, elect time) and revision, or 'no leader' (exit 1).",
		setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
			return nameArgs(func(a []string) command { return &leaderCmd{name: a[0]} }, "NAME")
		},
	}
)

// renew

var renewSpec = &commandSpec{
	name: "renew", synopsis: "renew NAME --ttl D", summary: "renew a lock by its token",
	help: `Renews lock NAME, taken with the Lock RPC, for --ttl from now.
FAILED_PRECONDITION (LOCK_NOT_HELD) if the token no longer holds
it. ` + tokenHelp,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &renewCmd{}
		fs.DurationVar(&c.ttl, "ttl", 0, "the new lease, from now (required)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "NAME"); err != nil {
				return nil, err
			}
			c.name = fs.Args()[0]
			if c.ttl <= 0 {
				return nil, usagef("", "--ttl is required and must be positive")
			}
			return c, nil
		}
	},
}

type renewCmd struct {
	name string
	ttl  time.Duration
}

func (c *renewCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	token, err := a.token("renew")
	if err != nil {
		return err
	}
	req := &coordv1.RenewRequest{Name: c.name, Token: token, Ttl: durationpb.New(c.ttl)}
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewLockServiceClient(conn).Renew(ctx, req)
	if err != nil {
		return &rpcError{"renew", err}
	}
	return a.emit(resp, fmt.Sprintf("renewed fence=%d ttl=%s expire_time=%s", resp.GetFence(), fmtDuration(resp.GetTtl()), fmtTime(resp.GetExpireTime())))
}

// check-fence

type checkFenceCmd struct {
	name  string
	fence uint64
}

func (c *checkFenceCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewLockServiceClient(conn).CheckFence(ctx, &coordv1.CheckFenceRequest{Name: c.name, Fence: c.fence})
	if err != nil {
		return &rpcError{"check-fence", err}
	}
	if err := a.emit(resp, map[bool]string{true: "current", false: "not current"}[resp.GetCurrent()]); err != nil {
		return err
	}
	if !resp.GetCurrent() {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("fence %d is no live holder's of lock %q", c.fence, c.name)}
	}
	return nil
}

// get-semaphore

type getSemaphoreCmd struct{ name string }

func (c *getSemaphoreCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewSemaphoreServiceClient(conn).GetSemaphore(ctx, &coordv1.GetSemaphoreRequest{Name: c.name})
	if err != nil {
		return &rpcError{"get-semaphore", err}
	}
	human := fmt.Sprintf("limit=%d holders=%d waiters=%d", resp.GetLimit(), len(resp.GetHolders()), resp.GetWaiters())
	for _, h := range resp.GetHolders() {
		human += fmt.Sprintf("\nholder owner=%q fence=%d ttl=%s", h.GetOwner(), h.GetFence(), fmtDuration(h.GetTtl()))
	}
	return a.emit(resp, human)
}

// leader

type leaderCmd struct{ name string }

func (c *leaderCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewElectionServiceClient(conn).Leader(ctx, &coordv1.LeaderRequest{Name: c.name})
	if err != nil {
		return &rpcError{"leader", err}
	}
	if !resp.GetHasLeader() {
		if err := a.emit(resp, fmt.Sprintf("no leader rev=%d", resp.GetRev())); err != nil {
			return err
		}
		return &exitError{code: exitFailure, msg: fmt.Sprintf("election %q has no leader", c.name)}
	}
	l := resp.GetLeader()
	return a.emit(resp, fmt.Sprintf("leader value=%q fence=%d elect_time=%s rev=%d", l.GetValue(), l.GetFence(), fmtTime(l.GetElectTime()), resp.GetRev()))
}

// extend

var extendSpec = &commandSpec{
	name: "extend", synopsis: "extend QUEUE RECEIPT --visibility D", summary: "keep a claimed message longer",
	help: `Extends the claim of RECEIPT to --visibility from now. FAILED_PRECONDITION
(RECEIPT_EXPIRED) if the claim ended first.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &extendCmd{}
		fs.DurationVar(&c.visibility, "visibility", 0, "the claim's new visibility timeout, from now (required)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "QUEUE", "RECEIPT"); err != nil {
				return nil, err
			}
			c.queue, c.receipt = fs.Args()[0], fs.Args()[1]
			if c.visibility <= 0 {
				return nil, usagef("", "--visibility is required and must be positive")
			}
			return c, nil
		}
	},
}

type extendCmd struct {
	queue, receipt string
	visibility     time.Duration
}

func (c *extendCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).Extend(ctx, &coordv1.ExtendRequest{Queue: c.queue, Receipt: c.receipt, VisibilityTimeout: durationpb.New(c.visibility)})
	if err != nil {
		return &rpcError{"extend", err}
	}
	return a.emit(resp, "extended expire_time="+fmtTime(resp.GetExpireTime()))
}

// redrive

var redriveSpec = &commandSpec{
	name: "redrive", synopsis: "redrive QUEUE [--max N | --id ID...]", summary: "move dead letters back to ready",
	help: `Moves up to --max of QUEUE's dead letters back to ready (0: coordd's
default), or exactly those named by --id (repeatable; IDs that are not
dead letters are ignored), and prints how many moved.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &redriveCmd{}
		fs.Int32Var(&c.max, "max", 0, "the most messages to move (0: coordd's default)")
		fs.StringArrayVar(&c.ids, "id", nil, "a dead letter's message ID (from dead-letters); repeatable")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "QUEUE"); err != nil {
				return nil, err
			}
			c.queue = fs.Args()[0]
			if c.max < 0 {
				return nil, usagef("", "--max is %d; it must not be negative", c.max)
			}
			if c.max != 0 && len(c.ids) > 0 {
				return nil, usagef("", "--max and --id are both set; set one")
			}
			return c, nil
		}
	},
}

type redriveCmd struct {
	queue string
	max   int32
	ids   []string
}

func (c *redriveCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).Redrive(ctx, &coordv1.RedriveRequest{Queue: c.queue, MaxMessages: c.max, MessageIds: c.ids})
	if err != nil {
		return &rpcError{"redrive", err}
	}
	return a.emit(resp, fmt.Sprintf("moved=%d", resp.GetMoved()))
}

// idem-begin, idem-finish, idem-extend

var idemBeginSpec = &commandSpec{
	name: "idem-begin", synopsis: "idem-begin KEY FINGERPRINT [--ttl D] [--wait D]", summary: "begin an idempotent operation",
	help: `Begins the operation of idempotency KEY with FINGERPRINT (a digest of the
request, as text). Prints its outcome: execute (with the owner token: pass
it to idem-finish as $COORDCTL_TOKEN), in_progress, completed (with the
result) or failed. --ttl is the owner's processing TTL; --wait waits for an
owner to finish.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &idemBeginCmd{}
		fs.DurationVar(&c.ttl, "ttl", 0, "the owner's processing TTL (default: coordd's)")
		fs.DurationVar(&c.wait, "wait", 0, "wait this long for an owner to finish")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "KEY", "FINGERPRINT"); err != nil {
				return nil, err
			}
			c.key, c.fingerprint = fs.Args()[0], fs.Args()[1]
			if c.ttl < 0 || c.wait < 0 {
				return nil, usagef("", "--ttl and --wait must not be negative")
			}
			return c, nil
		}
	},
}

type idemBeginCmd struct {
	key, fingerprint string
	ttl, wait        time.Duration
}

func (c *idemBeginCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	req := &coordv1.BeginIdempotentRequest{Key: c.key, Fingerprint: c.fingerprint}
	if c.ttl > 0 {
		req.ProcessingTtl = durationpb.New(c.ttl)
	}
	if c.wait > 0 {
		req.Wait = durationpb.New(c.wait)
	}
	ctx, cancel := a.call(ctx, c.wait)
	defer cancel()
	resp, err := coordv1.NewIdempotencyServiceClient(conn).BeginIdempotent(ctx, req)
	if err != nil {
		return &rpcError{"idem-begin", err}
	}
	var human string
	switch resp.GetOutcome() {
	case coordv1.Outcome_OUTCOME_EXECUTE:
		human = fmt.Sprintf("execute owner_token=%s expire_time=%s", resp.GetOwnerToken(), fmtTime(resp.GetExpireTime()))
	case coordv1.Outcome_OUTCOME_COMPLETED:
		human = fmt.Sprintf("completed result=%q", resp.GetResult())
	case coordv1.Outcome_OUTCOME_FAILED:
		human = fmt.Sprintf("failed %s", resp.GetFailure())
	default:
		human = "in_progress expire_time=" + fmtTime(resp.GetExpireTime())
	}
	return a.emit(resp, human)
}

var idemFinishSpec = &commandSpec{
	name: "idem-finish", synopsis: "idem-finish KEY RESULT [--result-ttl D]", summary: "store an idempotent operation's result",
	help: `Stores RESULT (text; - reads it from stdin) as the result of idempotency
KEY, as its owner. Exits 1 if nothing was stored. FAILED_PRECONDITION
(NOT_OWNER) if the owner's processing TTL ran out. A failure is not
stored by this command (use the API). ` + tokenHelp,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &idemFinishCmd{}
		fs.DurationVar(&c.resultTTL, "result-ttl", 0, "how long the result is kept (default: coordd's)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "KEY", "RESULT"); err != nil {
				return nil, err
			}
			c.key, c.result = fs.Args()[0], fs.Args()[1]
			if c.resultTTL < 0 {
				return nil, usagef("", "--result-ttl must not be negative")
			}
			return c, nil
		}
	},
}

type idemFinishCmd struct {
	key, result string
	resultTTL   time.Duration
}

func (c *idemFinishCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	token, err := a.token("idem-finish")
	if err != nil {
		return err
	}
	result := []byte(c.result)
	if c.result == "-" {
		if result, err = readAllLimited(a.stdin); err != nil {
			return err
		}
	}
	req := &coordv1.FinishRequest{Key: c.key, OwnerToken: token, Result: result}
	if c.resultTTL > 0 {
		req.ResultTtl = durationpb.New(c.resultTTL)
	}
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewIdempotencyServiceClient(conn).Finish(ctx, req)
	if err != nil {
		return &rpcError{"idem-finish", err}
	}
	if err := a.emit(resp, map[bool]string{true: "stored", false: "not stored"}[resp.GetStored()]); err != nil {
		return err
	}
	if !resp.GetStored() {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("nothing was stored for key %q", c.key)}
	}
	return nil
}

var idemExtendSpec = &commandSpec{
	name: "idem-extend", synopsis: "idem-extend KEY [--ttl D]", summary: "lengthen an idempotent operation's lease",
	help: `Extends the owner's processing lease of idempotency KEY to --ttl from now
(default: coordd's). FAILED_PRECONDITION (NOT_OWNER) if it ran out. ` + tokenHelp,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &idemExtendCmd{}
		fs.DurationVar(&c.ttl, "ttl", 0, "the new processing TTL, from now (default: coordd's)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "KEY"); err != nil {
				return nil, err
			}
			c.key = fs.Args()[0]
			if c.ttl < 0 {
				return nil, usagef("", "--ttl must not be negative")
			}
			return c, nil
		}
	},
}

type idemExtendCmd struct {
	key string
	ttl time.Duration
}

func (c *idemExtendCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	token, err := a.token("idem-extend")
	if err != nil {
		return err
	}
	req := &coordv1.ExtendIdempotentRequest{Key: c.key, OwnerToken: token}
	if c.ttl > 0 {
		req.ProcessingTtl = durationpb.New(c.ttl)
	}
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewIdempotencyServiceClient(conn).ExtendIdempotent(ctx, req)
	if err != nil {
		return &rpcError{"idem-extend", err}
	}
	return a.emit(resp, "extended expire_time="+fmtTime(resp.GetExpireTime()))
}
