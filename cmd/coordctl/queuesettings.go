package main

// Commands for a queue's settings and schedules: pause, resume,
// configure-queue, queue-settings, and schedule put|delete|list.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

var pauseSpec = &commandSpec{
	name: "pause", synopsis: "pause QUEUE", summary: "stop a queue's claims (enqueues go on)",
	help: `Pauses QUEUE on every coordd instance: Claim hands out nothing until
resume (claims made before stay live). Prints the queue's settings.`,
	setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		return nameArgs(func(a []string) command { return &pauseCmd{queue: a[0], paused: true} }, "QUEUE")
	},
}

var resumeSpec = &commandSpec{
	name: "resume", synopsis: "resume QUEUE", summary: "let a paused queue's claims go on",
	help: `Resumes QUEUE and wakes its waiting claims. Prints the queue's settings.`,
	setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		return nameArgs(func(a []string) command { return &pauseCmd{queue: a[0]} }, "QUEUE")
	},
}

type pauseCmd struct {
	queue  string
	paused bool
}

func (c *pauseCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	q := coordv1.NewQueueServiceClient(conn)
	if c.paused {
		resp, err := q.PauseQueue(ctx, &coordv1.PauseQueueRequest{Queue: c.queue})
		if err != nil {
			return &rpcError{"pause", err}
		}
		return a.emit(resp, fmtSettings(resp.GetSettings()))
	}
	resp, err := q.ResumeQueue(ctx, &coordv1.ResumeQueueRequest{Queue: c.queue})
	if err != nil {
		return &rpcError{"resume", err}
	}
	return a.emit(resp, fmtSettings(resp.GetSettings()))
}

// fmtSettings is a queue's settings on one line.
func fmtSettings(s *coordv1.QueueSettings) string {
	out := fmt.Sprintf("paused=%v max_in_flight=%d", s.GetPaused(), s.GetMaxInFlight())
	if r := s.GetClaimRate(); r != nil {
		return out + fmt.Sprintf(" claim_rate=%d/%s", r.GetLimit(), r.GetPeriod().AsDuration())
	}
	return out + " claim_rate=none"
}

var configureQueueSpec = &commandSpec{
	name: "configure-queue", synopsis: "configure-queue QUEUE [--max-in-flight N] [--claim-rate N/PERIOD]",
	summary: "cap a queue's messages in flight and its claim rate",
	help: `Replaces QUEUE's caps (a pause stays): at most --max-in-flight messages
in flight across every consumer and instance, at most N claims per PERIOD
(--claim-rate 100/1s, a token bucket). An option left out is no cap.
Prints the queue's settings.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &configureQueueCmd{}
		var rate string
		fs.Int32Var(&c.max, "max-in-flight", 0, "most messages in flight at once (0: no cap)")
		fs.StringVar(&rate, "claim-rate", "", "most claims per period, as N/PERIOD (100/1s, 5/1m); empty: no rate")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "QUEUE"); err != nil {
				return nil, err
			}
			c.queue = fs.Args()[0]
			if rate != "" {
				n, p, ok := strings.Cut(rate, "/")
				limit, err1 := strconv.ParseInt(n, 10, 64)
				period, err2 := time.ParseDuration(p)
				if !ok || err1 != nil || err2 != nil {
					return nil, usagef("", "--claim-rate %q is not N/PERIOD, like 100/1s", rate)
				}
				c.rate = &coordv1.ClaimRate{Limit: limit, Period: durationpb.New(period)}
			}
			return c, nil
		}
	},
}

type configureQueueCmd struct {
	queue string
	max   int32
	rate  *coordv1.ClaimRate
}

func (c *configureQueueCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).ConfigureQueue(ctx, &coordv1.ConfigureQueueRequest{
		Queue: c.queue, MaxInFlight: c.max, ClaimRate: c.rate,
	})
	if err != nil {
		return &rpcError{"configure-queue", err}
	}
	return a.emit(resp, fmtSettings(resp.GetSettings()))
}

var queueSettingsSpec = &commandSpec{
	name: "queue-settings", synopsis: "queue-settings QUEUE", summary: "show a queue's pause and caps",
	help: "Prints whether QUEUE is paused, its max_in_flight and its claim_rate.",
	setup: func(*pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		return nameArgs(func(a []string) command { return &queueSettingsCmd{queue: a[0]} }, "QUEUE")
	},
}

type queueSettingsCmd struct{ queue string }

func (c *queueSettingsCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).GetQueueSettings(ctx, &coordv1.GetQueueSettingsRequest{Queue: c.queue})
	if err != nil {
		return &rpcError{"queue-settings", err}
	}
	return a.emit(resp, fmtSettings(resp.GetSettings()))
}

var scheduleSpec = &commandSpec{
	name: "schedule", synopsis: "schedule put QUEUE NAME SPEC [PAYLOAD] [flags] | schedule delete QUEUE NAME | schedule list [QUEUE]",
	summary: "put, delete or list a queue's schedules",
	help: `put stores schedule NAME of QUEUE: each tick of SPEC enqueues one message
with PAYLOAD (- reads stdin). SPEC is five cron fields (six with seconds
first), a descriptor (@daily) or "@every 30s"; quote it. Flags of put:
--time-zone (IANA, default UTC), --group, --priority, --max-attempts.
delete removes one; list prints a queue's schedules (every queue's without
QUEUE) with their last and next ticks.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &scheduleCmd{}
		fs.StringVar(&c.req.TimeZone, "time-zone", "", "put: the IANA time zone of a cron spec (empty: UTC)")
		fs.StringVar(&c.req.Group, "group", "", "put: each tick's message group")
		fs.Int32Var(&c.req.Priority, "priority", 0, "put: each tick's message priority, 0 to 9")
		fs.Int32Var(&c.req.MaxAttempts, "max-attempts", 0, "put: each tick's max attempts (0: coordd's default)")
		return func(fs *pflag.FlagSet) (command, error) {
			args := fs.Args()
			if len(args) == 0 {
				return nil, usagef("", "missing put, delete or list")
			}
			c.op, args = args[0], args[1:]
			switch c.op {
			case "put":
				if len(args) < 3 || len(args) > 4 {
					return nil, usagef("", "schedule put wants QUEUE NAME SPEC [PAYLOAD]")
				}
				c.req.Queue, c.req.Name, c.req.Spec = args[0], args[1], args[2]
				if len(args) == 4 {
					c.payload = args[3]
				}
			case "delete":
				if len(args) != 2 {
					return nil, usagef("", "schedule delete wants QUEUE NAME")
				}
				c.req.Queue, c.req.Name = args[0], args[1]
			case "list":
				if len(args) > 1 {
					return nil, usagef("", "schedule list wants at most QUEUE")
				}
				if len(args) == 1 {
					c.req.Queue = args[0]
				}
			default:
				return nil, usagef("", "unknown schedule command %q: want put, delete or list", c.op)
			}
			return c, nil
		}
	},
}

type scheduleCmd struct {
	op      string
	req     coordv1.PutScheduleRequest
	payload string
}

func (c *scheduleCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	q := coordv1.NewQueueServiceClient(conn)
	switch c.op {
	case "put":
		c.req.Payload = []byte(c.payload)
		if c.payload == "-" {
			b, err := readAllLimited(a.stdin)
			if err != nil {
				return err
			}
			c.req.Payload = b
		}
		resp, err := q.PutSchedule(ctx, &c.req)
		if err != nil {
			return &rpcError{"schedule put", err}
		}
		return a.emit(resp, fmtSchedule(resp.GetSchedule()))
	case "delete":
		resp, err := q.DeleteSchedule(ctx, &coordv1.DeleteScheduleRequest{Queue: c.req.Queue, Name: c.req.Name})
		if err != nil {
			return &rpcError{"schedule delete", err}
		}
		return a.emit(resp, fmt.Sprintf("deleted=%v", resp.GetDeleted()))
	}
	resp, err := q.ListSchedules(ctx, &coordv1.ListSchedulesRequest{Queue: c.req.Queue})
	if err != nil {
		return &rpcError{"schedule list", err}
	}
	if a.opts.json {
		return a.emit(resp, "")
	}
	if len(resp.GetSchedules()) == 0 {
		fmt.Fprintln(a.stderr, "coordctl: no schedules")
	}
	for _, s := range resp.GetSchedules() {
		if _, err := fmt.Fprintln(a.stdout, fmtSchedule(s)); err != nil {
			return err
		}
	}
	return nil
}

// fmtSchedule is a schedule on one line.
func fmtSchedule(s *coordv1.Schedule) string {
	return fmt.Sprintf("queue=%s name=%s spec=%s time_zone=%s last_time=%s next_time=%s",
		strconv.Quote(s.GetQueue()), strconv.Quote(s.GetName()), strconv.Quote(s.GetSpec()), strconv.Quote(s.GetTimeZone()),
		fmtTime(s.GetLastTime()), fmtTime(s.GetNextTime()))
}
