package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// command is a parsed command, ready to run against coordd.
type command interface {
	run(ctx context.Context, a *app, conn *grpc.ClientConn) error
}

// commandSpec describes a command: its help and how to parse it.
type commandSpec struct {
	name     string
	synopsis string // after `coordctl [global flags]`
	summary  string // one line for `coordctl help`
	help     string
	// setup defines the command's flags on fs and returns the function that
	// builds the command once fs has parsed the command line.
	setup func(fs *pflag.FlagSet) func(fs *pflag.FlagSet) (command, error)
}

var commands = []*commandSpec{
	lockSpec,
	electSpec,
	{
		name: "get-lock", synopsis: "get-lock NAME", summary: "show who holds a lock",
		help: "Prints the holder of lock NAME (owner, fence, remaining lease), or 'not held'. Never the token.",
		setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
			return nameArgs(func(a []string) command { return &getLockCmd{name: a[0]} }, "NAME")
		},
	},
	{
		name: "release", synopsis: "release NAME TOKEN", summary: "release a lock by its token",
		help: `Releases lock NAME if TOKEN still holds it, for a lock taken with the
Lock RPC (coordctl lock releases its own locks). Exits 1, changing nothing,
if TOKEN no longer holds the lock.`,
		setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
			return nameArgs(func(a []string) command { return &releaseCmd{name: a[0], token: a[1]} }, "NAME", "TOKEN")
		},
	},
	renewSpec,
	checkFenceSpec,
	getSemaphoreSpec,
	leaderSpec,
	allowSpec,
	idemBeginSpec,
	idemFinishSpec,
	idemExtendSpec,
	enqueueSpec,
	claimSpec,
	{
		name: "ack", synopsis: "ack QUEUE RECEIPT", summary: "delete a claimed message",
		help: `Deletes the message claimed with RECEIPT. FAILED_PRECONDITION
(RECEIPT_EXPIRED) means the claim ended first: the message may be with
another consumer.`,
		setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
			return nameArgs(func(a []string) command { return &ackCmd{queue: a[0], receipt: a[1]} }, "QUEUE", "RECEIPT")
		},
	},
	nackSpec,
	extendSpec,
	{
		name: "stats", synopsis: "stats QUEUE", summary: "count a queue's messages",
		help: "Prints how many messages of QUEUE are ready, delayed, in flight and dead.",
		setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
			return nameArgs(func(a []string) command { return &statsCmd{queue: a[0]} }, "QUEUE")
		},
	},
	redriveSpec,
	deadLettersSpec,
	purgeSpec,
	pauseSpec,
	resumeSpec,
	configureQueueSpec,
	queueSettingsSpec,
	scheduleSpec,
	policySpec,
}

func findCommand(name string) *commandSpec {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// nameArgs is the parser of a command without flags that takes exactly the
// named arguments.
func nameArgs(build func([]string) command, names ...string) func(*pflag.FlagSet) (command, error) {
	return func(fs *pflag.FlagSet) (command, error) {
		if err := exactArgs(fs.Args(), names...); err != nil {
			return nil, err
		}
		return build(fs.Args()), nil
	}
}

// exactArgs checks that args has one non-empty value per name.
func exactArgs(args []string, names ...string) error {
	if len(args) < len(names) {
		return usagef("", "missing %s", strings.Join(names[len(args):], " "))
	}
	if len(args) > len(names) {
		return usagef("", "unexpected argument %q", args[len(names)])
	}
	for i, n := range names {
		if args[i] == "" {
			return usagef("", "%s is empty", n)
		}
	}
	return nil
}

// call returns the context of one call: --timeout plus the call's own wait.
func (a *app) call(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.opts.timeout+wait)
}

// emit prints m as one line of JSON with --json, else the human line.
func (a *app) emit(m proto.Message, human string) error {
	if !a.opts.json {
		_, err := fmt.Fprintln(a.stdout, human)
		return err
	}
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	// protojson varies its whitespace on purpose; compact it to one stable line.
	if err := json.Compact(&out, b); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = a.stdout.Write(out.Bytes())
	return err
}

func fmtDuration(d *durationpb.Duration) string {
	return d.AsDuration().Round(time.Millisecond).String()
}

func fmtTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// get-lock

type getLockCmd struct{ name string }

func (c *getLockCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewLockServiceClient(conn).GetLock(ctx, &coordv1.GetLockRequest{Name: c.name})
	if err != nil {
		return &rpcError{"get-lock", err}
	}
	human := "not held"
	if resp.GetHeld() {
		human = fmt.Sprintf("held owner=%q fence=%d ttl=%s expire_time=%s",
			resp.GetOwner(), resp.GetFence(), fmtDuration(resp.GetTtl()), fmtTime(resp.GetExpireTime()))
		if resp.GetSessionBound() {
			human += " session_bound"
		}
	}
	return a.emit(resp, human)
}

// release

type releaseCmd struct{ name, token string }

func (c *releaseCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewLockServiceClient(conn).Release(ctx, &coordv1.ReleaseRequest{Name: c.name, Token: c.token})
	if err != nil {
		return &rpcError{"release", err}
	}
	if err := a.emit(resp, map[bool]string{true: "released", false: "not released"}[resp.GetReleased()]); err != nil {
		return err
	}
	if !resp.GetReleased() {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("the token does not hold lock %q (it expired, was released, or is another's); nothing changed", c.name)}
	}
	return nil
}

// allow

var allowSpec = &commandSpec{
	name:     "allow",
	synopsis: "allow KEY (--policy P | --algorithm A --limit N --period D [--burst B]) [--cost N] [--peek | --wait D]",
	summary:  "ask a rate limiter; exit 0 if allowed, 1 if denied",
	help: `Takes --cost units from the limiter of KEY, under a policy named in
coordd's configuration or an inline limit. Exits 0 if allowed, 1 if denied
(printing retry_after: how long until the same call would succeed, and, under
a policy of several limits, denied_by: the limit that denied). A denial
consumes nothing; --peek answers without consuming. With --wait, a denied
call waits until allowed, for up to D (coordd's limits.max_wait at most).

Algorithms: fixed_window, sliding_window, sliding_log, token_bucket,
leaky_bucket.

  coordctl allow user:42 --algorithm token_bucket --limit 10 --period 1s --wait 5s && run-the-job`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &allowCmd{}
		var algorithm string
		fs.StringVar(&c.policy, "policy", "", "a policy named in coordd's ratelimit.policies")
		fs.StringVar(&algorithm, "algorithm", "", "inline limit: the algorithm")
		fs.Int64Var(&c.limit, "limit", 0, "inline limit: units per period")
		fs.DurationVar(&c.period, "period", 0, "inline limit: the period")
		fs.Int64Var(&c.burst, "burst", 0, "inline limit: bucket capacity of token_bucket and leaky_bucket (0: the default)")
		fs.Int64Var(&c.cost, "cost", 0, "units to take (0: 1)")
		fs.BoolVar(&c.peek, "peek", false, "answer without consuming")
		fs.DurationVar(&c.wait, "wait", 0, "if denied, wait up to this long until allowed (0: do not wait)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "KEY"); err != nil {
				return nil, err
			}
			c.key = fs.Args()[0]
			if c.wait < 0 || (c.wait > 0 && c.peek) {
				return nil, usagef("", "--wait must not be negative, nor given with --peek")
			}
			inline := fs.Changed("algorithm") || fs.Changed("limit") || fs.Changed("period") || fs.Changed("burst")
			switch {
			case c.policy != "" && inline:
				return nil, usagef("", "--policy and an inline limit (--algorithm, --limit, --period, --burst) exclude each other")
			case c.policy == "" && !inline:
				return nil, usagef("", "give --policy or an inline limit (--algorithm, --limit, --period)")
			case inline && (!fs.Changed("algorithm") || !fs.Changed("limit") || !fs.Changed("period")):
				return nil, usagef("", "an inline limit needs --algorithm, --limit and --period")
			}
			if inline {
				alg, ok := parseAlgorithm(algorithm)
				if !ok {
					return nil, usagef("", "--algorithm %q is not one of fixed_window, sliding_window, sliding_log, token_bucket, leaky_bucket", algorithm)
				}
				c.algorithm = alg
			}
			if c.cost < 0 {
				return nil, usagef("", "--cost is %d; it must not be negative", c.cost)
			}
			return c, nil
		}
	},
}

// parseAlgorithm accepts token_bucket, token-bucket, TOKEN_BUCKET and
// ALGORITHM_TOKEN_BUCKET.
func parseAlgorithm(s string) (coordv1.Algorithm, bool) {
	n := strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
	if !strings.HasPrefix(n, "ALGORITHM_") {
		n = "ALGORITHM_" + n
	}
	v, ok := coordv1.Algorithm_value[n]
	if !ok || v == int32(coordv1.Algorithm_ALGORITHM_UNSPECIFIED) {
		return 0, false
	}
	return coordv1.Algorithm(v), true
}

type allowCmd struct {
	key       string
	policy    string
	algorithm coordv1.Algorithm // inline limit, if set
	limit     int64
	period    time.Duration
	burst     int64
	cost      int64
	peek      bool
	wait      time.Duration
}

func (c *allowCmd) request() *coordv1.AllowRequest {
	req := &coordv1.AllowRequest{Key: c.key, Policy: c.policy, Cost: c.cost, Peek: c.peek}
	if c.wait > 0 {
		req.Wait = durationpb.New(c.wait)
	}
	if c.algorithm != coordv1.Algorithm_ALGORITHM_UNSPECIFIED {
		req.Limit = &coordv1.Limit{Algorithm: c.algorithm, Limit: c.limit, Period: durationpb.New(c.period), Burst: c.burst}
	}
	return req
}

func (c *allowCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, c.wait)
	defer cancel()
	resp, err := coordv1.NewRateLimitServiceClient(conn).Allow(ctx, c.request())
	if err != nil {
		return &rpcError{"allow", err}
	}
	var human string
	if resp.GetAllowed() {
		human = fmt.Sprintf("allowed remaining=%d limit=%d", resp.GetRemaining(), resp.GetLimit())
	} else {
		human = fmt.Sprintf("denied retry_after=%s remaining=%d limit=%d", fmtDuration(resp.GetRetryAfter()), resp.GetRemaining(), resp.GetLimit())
		if by := resp.GetDeniedBy(); by != "" {
			human += fmt.Sprintf(" denied_by=%q", by)
		}
	}
	human += " reset_after=" + fmtDuration(resp.GetResetAfter())
	if resp.GetDegraded() {
		human += " degraded"
	}
	if resp.GetShadowDenied() {
		human += " shadow_denied"
	}
	if err := a.emit(resp, human); err != nil {
		return err
	}
	if !resp.GetAllowed() {
		return &exitError{code: exitFailure} // a denial is an answer, not an error: nothing more to say
	}
	return nil
}

// enqueue

var enqueueSpec = &commandSpec{
	name:     "enqueue",
	synopsis: "enqueue QUEUE [--delay D | --at RFC3339] [--dedup-id ID] [--max-attempts N] [--priority P] [--group G] [PAYLOAD | -]",
	summary:  "add a message to a queue",
	help: `Adds a message with PAYLOAD (or the whole of stdin with -, or empty) to
QUEUE, deliverable after --delay or at --at. With --dedup-id, a repeat within
coordd's dedup window adds nothing and prints the first message (duplicate).
After UNAVAILABLE the message may or may not have been added: retry with the
same --dedup-id to add it at most once. A --priority from 0 to 9 (higher is
claimed first); messages of one --group are delivered one at a time, in the
order they were enqueued. With --replace, a --dedup-id that names a message
not yet claimed replaces its payload, delay and priority (replaced); one
that names a message being worked on or done adds a new one.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &enqueueCmd{}
		var at string
		fs.DurationVar(&c.delay, "delay", 0, "deliver after this delay")
		fs.StringVar(&at, "at", "", "deliver at this instant (RFC 3339, e.g. 2030-01-02T15:04:05Z)")
		fs.StringVar(&c.dedupID, "dedup-id", "", "deduplication ID")
		fs.Int32Var(&c.maxAttempts, "max-attempts", 0, "deliveries before the message is a dead letter (0: coordd's default)")
		fs.Int32Var(&c.priority, "priority", 0, "0 to 9: among ready messages, a higher one is claimed first")
		fs.StringVar(&c.group, "group", "", "message group: its messages are delivered one at a time, in enqueue order")
		fs.BoolVar(&c.replace, "replace", false, "with --dedup-id: replace the message it names if not yet claimed (debounce), else add a new one")
		return func(fs *pflag.FlagSet) (command, error) {
			args := fs.Args()
			switch len(args) {
			case 0:
				return nil, usagef("", "missing QUEUE")
			case 1:
			case 2:
				if args[1] == "-" {
					c.fromStdin = true
				} else {
					c.payload = args[1]
				}
			default:
				return nil, usagef("", "unexpected argument %q (quote a PAYLOAD with spaces)", args[2])
			}
			if c.queue = args[0]; c.queue == "" {
				return nil, usagef("", "QUEUE is empty")
			}
			if c.delay < 0 {
				return nil, usagef("", "--delay is %v; it must not be negative", c.delay)
			}
			if fs.Changed("at") {
				if fs.Changed("delay") {
					return nil, usagef("", "--delay and --at exclude each other")
				}
				t, err := time.Parse(time.RFC3339Nano, at)
				if err != nil {
					return nil, usagef("", "--at %q is not an RFC 3339 time like 2030-01-02T15:04:05Z", at)
				}
				c.at = t
			}
			if c.maxAttempts < 0 {
				return nil, usagef("", "--max-attempts is %d; it must not be negative", c.maxAttempts)
			}
			return c, nil
		}
	},
}

// maxStdinPayload bounds what enqueue reads from stdin; coordd's own limit
// (queue.max_payload_bytes, 256 KiB by default) is far lower.
const maxStdinPayload = 64 << 20

// readAllLimited reads a payload from stdin, at most maxStdinPayload bytes.
func readAllLimited(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxStdinPayload+1))
	if err != nil {
		return nil, fmt.Errorf("reading the payload from stdin: %w", err)
	}
	if len(b) > maxStdinPayload {
		return nil, fmt.Errorf("the payload on stdin is over %d bytes", maxStdinPayload)
	}
	return b, nil
}

type enqueueCmd struct {
	queue       string
	payload     string
	fromStdin   bool
	delay       time.Duration
	at          time.Time
	dedupID     string
	maxAttempts int32
	priority    int32
	group       string
	replace     bool
}

func (c *enqueueCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	payload := []byte(c.payload)
	if c.fromStdin {
		b, err := readAllLimited(a.stdin)
		if err != nil {
			return err
		}
		payload = b
	}
	req := &coordv1.EnqueueRequest{Queue: c.queue, Payload: payload, DedupId: c.dedupID, MaxAttempts: c.maxAttempts,
		Priority: c.priority, Group: c.group}
	if c.replace {
		req.DedupMode = coordv1.DedupMode_DEDUP_MODE_REPLACE
	}
	if c.delay > 0 {
		req.Delay = durationpb.New(c.delay)
	}
	if !c.at.IsZero() {
		req.DeliverTime = timestamppb.New(c.at)
	}
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).Enqueue(ctx, req)
	if err != nil {
		return &rpcError{"enqueue", err}
	}
	human := fmt.Sprintf("message_id=%s deliver_time=%s", resp.GetMessageId(), fmtTime(resp.GetDeliverTime()))
	if resp.GetDuplicate() {
		human += " duplicate"
	}
	if resp.GetReplaced() {
		human += " replaced"
	}
	return a.emit(resp, human)
}

// claim

var claimSpec = &commandSpec{
	name:     "claim",
	synopsis: "claim QUEUE [--max N] [--visibility D] [--wait D]",
	summary:  "claim ready messages",
	help: `Claims up to --max ready messages of QUEUE and prints one line per message:
message_id, attempt, receipt (for ack, nack) and payload (quoted). It prints
nothing (and says so on stderr) if none was ready within --wait. A message
not acked within --visibility is delivered again: delivery is at least once.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &claimCmd{}
		fs.Int32Var(&c.max, "max", 1, "at most this many messages")
		fs.DurationVar(&c.visibility, "visibility", 0, "how long the messages stay claimed (0: coordd's default, 30s)")
		fs.DurationVar(&c.wait, "wait", 0, "how long to wait for a message (0: do not wait)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "QUEUE"); err != nil {
				return nil, err
			}
			c.queue = fs.Args()[0]
			switch {
			case c.max < 1:
				return nil, usagef("", "--max is %d; it must be at least 1", c.max)
			case c.visibility < 0:
				return nil, usagef("", "--visibility is %v; it must not be negative", c.visibility)
			case c.wait < 0:
				return nil, usagef("", "--wait is %v; it must not be negative", c.wait)
			}
			return c, nil
		}
	},
}

type claimCmd struct {
	queue      string
	max        int32
	visibility time.Duration
	wait       time.Duration
}

func (c *claimCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	req := &coordv1.ClaimRequest{Queue: c.queue, MaxMessages: c.max}
	if c.visibility > 0 {
		req.VisibilityTimeout = durationpb.New(c.visibility)
	}
	if c.wait > 0 {
		req.Wait = durationpb.New(c.wait)
	}
	ctx, cancel := a.call(ctx, c.wait)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).Claim(ctx, req)
	if err != nil {
		return &rpcError{"claim", err}
	}
	if a.opts.json {
		return a.emit(resp, "")
	}
	if len(resp.GetMessages()) == 0 {
		fmt.Fprintln(a.stderr, "coordctl: no message ready")
		return nil
	}
	for _, m := range resp.GetMessages() {
		if _, err := fmt.Fprintf(a.stdout, "message_id=%s attempt=%d receipt=%s payload=%s\n",
			m.GetMessageId(), m.GetAttempt(), m.GetReceipt(), strconv.Quote(string(m.GetPayload()))); err != nil {
			return err
		}
	}
	return nil
}

// ack

type ackCmd struct{ queue, receipt string }

func (c *ackCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).Ack(ctx, &coordv1.AckRequest{Queue: c.queue, Receipt: c.receipt})
	if err != nil {
		return &rpcError{"ack", err}
	}
	return a.emit(resp, "acked")
}

// nack

var nackSpec = &commandSpec{
	name:     "nack",
	synopsis: "nack QUEUE RECEIPT [--delay D]",
	summary:  "give a claimed message back",
	help: `Gives the message claimed with RECEIPT back for another attempt after
--delay (without it: coordd's exponential backoff by attempt), or to the dead
letters if it has had its max attempts.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &nackCmd{}
		fs.DurationVar(&c.delay, "delay", 0, "deliver again after this delay (default: backoff by attempt)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "QUEUE", "RECEIPT"); err != nil {
				return nil, err
			}
			c.queue, c.receipt = fs.Args()[0], fs.Args()[1]
			c.delaySet = fs.Changed("delay")
			if c.delay < 0 {
				return nil, usagef("", "--delay is %v; it must not be negative", c.delay)
			}
			return c, nil
		}
	},
}

type nackCmd struct {
	queue, receipt string
	delay          time.Duration
	delaySet       bool
}

func (c *nackCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	req := &coordv1.NackRequest{Queue: c.queue, Receipt: c.receipt}
	if c.delaySet {
		req.Delay = durationpb.New(c.delay)
	}
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).Nack(ctx, req)
	if err != nil {
		return &rpcError{"nack", err}
	}
	human := "nacked deliver_time=" + fmtTime(resp.GetDeliverTime())
	if resp.GetDeadLettered() {
		human = "dead-lettered"
	}
	return a.emit(resp, human)
}

// stats

type statsCmd struct{ queue string }

func (c *statsCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).Stats(ctx, &coordv1.StatsRequest{Queue: c.queue})
	if err != nil {
		return &rpcError{"stats", err}
	}
	human := fmt.Sprintf("ready=%d delayed=%d in_flight=%d dead=%d", resp.GetReady(), resp.GetDelayed(), resp.GetInFlight(), resp.GetDead())
	if resp.GetPaused() {
		human += " paused"
	}
	return a.emit(resp, human)
}
