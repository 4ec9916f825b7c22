package main

// Commands for a queue's dead letters: dead-letters lists them a page at a
// time, purge deletes them (only with --yes: it cannot be undone), and
// redrive --id moves named ones back (redriveSpec).

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

var deadLettersSpec = &commandSpec{
	name: "dead-letters", synopsis: "dead-letters QUEUE [--page-size N] [--page-token T] [--preview N]",
	summary: "list a queue's dead letters",
	help: `Prints a page of QUEUE's dead letters, oldest death first: each one's
message_id, attempts, payload size, enqueue and death times, priority,
group and the first --preview bytes of its payload (quoted). If more
follow, the last line is next_page_token=T: pass it as --page-token for
the next page. 0 means coordd's default (page size 50, preview 256 bytes).`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &deadLettersCmd{}
		fs.Int32Var(&c.size, "page-size", 0, "dead letters per page (0: coordd's default, 50; at most 500)")
		fs.StringVar(&c.token, "page-token", "", "the next_page_token of the page before")
		fs.Int32Var(&c.preview, "preview", 0, "payload bytes to show (0: coordd's default, 256; at most 4096)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "QUEUE"); err != nil {
				return nil, err
			}
			c.queue = fs.Args()[0]
			if c.size < 0 || c.preview < 0 {
				return nil, usagef("", "--page-size and --preview must not be negative")
			}
			return c, nil
		}
	},
}

type deadLettersCmd struct {
	queue, token  string
	size, preview int32
}

func (c *deadLettersCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	resp, err := coordv1.NewQueueServiceClient(conn).ListDeadLetters(ctx, &coordv1.ListDeadLettersRequest{
		Queue: c.queue, PageSize: c.size, PageToken: c.token, PreviewBytes: c.preview,
	})
	if err != nil {
		return &rpcError{"dead-letters", err}
	}
	if a.opts.json {
		return a.emit(resp, "")
	}
	if len(resp.GetDeadLetters()) == 0 {
		fmt.Fprintln(a.stderr, "coordctl: no dead letters")
	}
	for _, d := range resp.GetDeadLetters() {
		if _, err := fmt.Fprintf(a.stdout, "message_id=%s attempts=%d size=%d enqueue_time=%s dead_time=%s priority=%d group=%s preview=%s\n",
			d.GetMessageId(), d.GetAttempts(), d.GetPayloadSize(), fmtTime(d.GetEnqueueTime()), fmtTime(d.GetDeadTime()),
			d.GetPriority(), strconv.Quote(d.GetGroup()), strconv.Quote(string(d.GetPayloadPreview()))); err != nil {
			return err
		}
	}
	if t := resp.GetNextPageToken(); t != "" {
		_, err := fmt.Fprintf(a.stdout, "next_page_token=%s\n", t)
		return err
	}
	return nil
}

var purgeSpec = &commandSpec{
	name: "purge", synopsis: "purge QUEUE --yes [--max N]", summary: "delete a queue's dead letters for good",
	help: `Deletes QUEUE's dead letters, oldest first, for good: up to --max of
them (0: all, calling coordd until none remain), and prints how many were
purged and how many remain. Needs --yes, since it cannot be undone.`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &purgeCmd{}
		fs.BoolVar(&c.yes, "yes", false, "really delete them")
		fs.Int64Var(&c.max, "max", 0, "the most dead letters to delete (0: all)")
		return func(fs *pflag.FlagSet) (command, error) {
			if err := exactArgs(fs.Args(), "QUEUE"); err != nil {
				return nil, err
			}
			c.queue = fs.Args()[0]
			if !c.yes {
				return nil, usagef("", "purge deletes dead letters for good: add --yes")
			}
			if c.max < 0 {
				return nil, usagef("", "--max is %d; it must not be negative", c.max)
			}
			return c, nil
		}
	},
}

type purgeCmd struct {
	queue string
	yes   bool
	max   int64
}

// purgeStep is the most one call asks for (the RPC's bound).
const purgeStep = 10000

func (c *purgeCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	qc := coordv1.NewQueueServiceClient(conn)
	total := &coordv1.PurgeDeadLettersResponse{}
	for {
		step := int64(purgeStep)
		if c.max > 0 {
			step = min(step, c.max-total.GetPurged())
		}
		cctx, cancel := a.call(ctx, 0)
		resp, err := qc.PurgeDeadLetters(cctx, &coordv1.PurgeDeadLettersRequest{Queue: c.queue, MaxMessages: int32(step)})
		cancel()
		if err != nil {
			if total.GetPurged() > 0 {
				fmt.Fprintf(a.stderr, "coordctl: purged %d before the error\n", total.GetPurged())
			}
			return &rpcError{"purge", err}
		}
		total.Purged += resp.GetPurged()
		total.Remaining = resp.GetRemaining()
		if resp.GetRemaining() == 0 || resp.GetPurged() == 0 || (c.max > 0 && total.GetPurged() >= c.max) {
			break
		}
	}
	return a.emit(total, fmt.Sprintf("purged=%d remaining=%d", total.GetPurged(), total.GetRemaining()))
}
