package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/client"
)

var electSpec = &commandSpec{
	name:     "elect",
	synopsis: "elect NAME [--value V] [--ttl D] [--wait D] [--max-wait D] [--grace D] -- CMD [ARGS...]",
	summary:  "run a command while leader of an election",
	help: `Campaigns in election NAME with --value and runs CMD while leader. The
leadership is bound to a session that coordctl keeps alive with a heartbeat
every --ttl/3, as for lock. When CMD exits, coordctl resigns, ends the
session and exits with CMD's status.

If another candidate leads, coordctl exits 75 at once, naming the leader's
value; with --wait it first waits up to that long to be elected, candidates
being elected in arrival order. coordd bounds the wait of one call
(limits.max_wait, 1m by default; tell coordctl a higher one with --max-wait):
a longer --wait campaigns again, printing "waiting for NAME, held by VALUE"
to stderr each time.

CMD gets two variables: COORDD_FENCE, the term's fencing token, a number
greater than every earlier term's of NAME, and COORDD_ELECTION_NAME. Have
what the leader writes to reject a write whose fence is lower than the last
one it accepted: leadership is a lease.

A lost leadership ends the command as a lost lock does (see 'coordctl help
lock'): SIGTERM, then SIGKILL after --grace, and exit 70, when coordd reports
the session expired or the leadership lost, the election (which coordctl
observes) shows another leader or none, or no heartbeat is answered within
--ttl. Signals are passed on to CMD as by lock.

Exit status: CMD's (128+N if signal N killed it); 75 if another leads;
70 if the leadership was lost; 127 if CMD was not found, 126 if it could not
be started; 69 if coordd is unavailable.

  coordctl elect --wait 8760h scheduler --value "$(hostname)" -- sh -c './scheduler --fence "$COORDD_FENCE"'`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &electCmd{}
		fs.StringVar(&c.value, "value", "", "the value the leader shows to others (default HOSTNAME:PID)")
		fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "the session's TTL: how long the leadership outlives the last answered heartbeat (coordd bounds it: 1s to 5m by default)")
		fs.DurationVar(&c.wait, "wait", 0, "how long to wait to be elected (0: do not wait, exit 75)")
		fs.DurationVar(&c.maxWait, "max-wait", 0, "coordd's limits.max_wait, the longest wait of one call; a longer --wait calls again (0: 1m, coordd's default; a lower limit is found by itself)")
		fs.DurationVar(&c.grace, "grace", 5*time.Second, "after a lost leadership, the time between SIGTERM and SIGKILL")
		return func(fs *pflag.FlagSet) (command, error) {
			name, argv, err := nameAndCommand(fs, "elect")
			if err != nil {
				return nil, err
			}
			switch {
			case fs.Changed("value") && c.value == "":
				return nil, usagef("", "--value is empty")
			case c.ttl <= 0:
				return nil, usagef("", "--ttl is %v; it must be positive", c.ttl)
			case c.wait < 0:
				return nil, usagef("", "--wait is %v; it must not be negative", c.wait)
			case c.maxWait < 0:
				return nil, usagef("", "--max-wait is %v; it must not be negative", c.maxWait)
			case c.grace < 0:
				return nil, usagef("", "--grace is %v; it must not be negative", c.grace)
			}
			c.name, c.argv = name, argv
			return c, nil
		}
	},
}

type electCmd struct {
	name    string
	value   string // "" means HOSTNAME:PID
	ttl     time.Duration
	wait    time.Duration
	maxWait time.Duration // 0: defaultMaxWait
	grace   time.Duration
	argv    []string
}

func (c *electCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	value := c.value
	if value == "" {
		value = defaultOwner()
	}
	ec := coordv1.NewElectionServiceClient(conn)
	j := &holdJob{
		what: "election", kind: coordv1.HoldKind_HOLD_KIND_ELECTION, name: c.name, ttl: c.ttl, wait: c.wait, maxWait: c.maxWait, grace: c.grace,
		argv: c.argv, env: []string{"COORDD_ELECTION_NAME=" + c.name}, needs: "an election",
		try: func(ctx context.Context, sessionID string, wait time.Duration) (*attempt, error) {
			resp, err := ec.Campaign(ctx, &coordv1.CampaignRequest{
				Name: c.name, Value: []byte(value), SessionId: sessionID, Wait: optDuration(wait),
			})
			if err != nil {
				return nil, err
			}
			att := &attempt{acquired: resp.GetElected(), token: resp.GetToken(), fence: resp.GetFence()}
			if !att.acquired {
				resp.Token = ""
				att.resp = resp
				if l := resp.GetLeader(); resp.GetHasLeader() {
					att.blockedBy = quoteValue(l.GetValue())
					att.held = fmt.Sprintf("election %q is led by %s (fence %d)", c.name, att.blockedBy, l.GetFence())
				} else {
					att.blockedBy = "earlier candidates"
					att.held = fmt.Sprintf("election %q has no leader yet: earlier candidates go first", c.name)
				}
			}
			return att, nil
		},
		giveBack: func(ctx context.Context, token string) error {
			resp, err := ec.Resign(ctx, &coordv1.ResignRequest{Name: c.name, Token: token})
			if err != nil {
				return fmt.Errorf("resigning: %s; ending the session resigns too", describeStatus(err))
			}
			if !resp.GetResigned() {
				return fmt.Errorf("%w: Resign answered resigned=false, this candidate no longer led", errGoneAtEnd)
			}
			return nil
		},
	}
	j.watch = func(ctx context.Context, fence uint64) error { return watchTerm(ctx, conn, c.name, fence) }
	return j.run(ctx, a, conn)
}

// watchTerm follows election name with Observe (client.Observe, which
// opens a broken stream again) and returns once a change shows that the
// term with fence is over: another leader, or none. This catches what the
// session cannot report (a leadership the store lost while the session
// lives). It returns nil when ctx ends or when Observe cannot be used (the
// session still watches).
func watchTerm(ctx context.Context, cc grpc.ClientConnInterface, name string, fence uint64) error {
	for o := range client.Observe(ctx, cc, name) {
		switch {
		case !o.HasLeader:
			return fmt.Errorf("%w the election without a leader (rev %d)", errTermOver, o.Rev)
		case o.Leader.Fence != fence:
			return fmt.Errorf("%w another leader, %s with fence %d (rev %d)", errTermOver, quoteValue(o.Leader.Value), o.Leader.Fence, o.Rev)
		}
	}
	return nil
}

// errTermOver: Observe showed that the term was over.
var errTermOver = errors.New("coordd's Observe shows")

// maxShownValue bounds how much of a leader's value messages show.
const maxShownValue = 64

// quoteValue quotes a leader's value for a message, cut at maxShownValue
// bytes.
func quoteValue(v []byte) string {
	if len(v) > maxShownValue {
		return strconv.Quote(string(v[:maxShownValue])) + "…"
	}
	return strconv.Quote(string(v))
}

// nameAndCommand parses the arguments of `coordctl cmd NAME [flags] -- CMD
// [ARGS...]`.
func nameAndCommand(fs *pflag.FlagSet, cmd string) (name string, argv []string, err error) {
	args, dash := fs.Args(), fs.ArgsLenAtDash()
	switch {
	case dash < 0:
		return "", nil, usagef("", "missing -- before the command: coordctl %s NAME [flags] -- CMD [ARGS...]", cmd)
	case dash == 0:
		return "", nil, usagef("", "missing NAME before --")
	case dash > 1:
		return "", nil, usagef("", "unexpected argument %q before -- (one NAME)", args[1])
	case len(args) == 1:
		return "", nil, usagef("", "missing the command after --")
	case args[0] == "":
		return "", nil, usagef("", "NAME is empty")
	case args[1] == "":
		return "", nil, usagef("", "the command is empty")
	}
	return args[0], args[1:], nil
}
