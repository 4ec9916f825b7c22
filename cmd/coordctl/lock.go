package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

var lockSpec = &commandSpec{
	name:     "lock",
	synopsis: "lock NAME [--ttl D] [--wait D] [--owner LABEL] [--max-hold D] [--fail-if-held] [--grace D] -- CMD [ARGS...]",
	summary:  "run a command while holding a lock",
	help: `Runs CMD while holding lock NAME. The lock is bound to a session that
coordctl keeps alive with a heartbeat every --ttl/3. When CMD exits,
coordctl ends the session, which releases the lock at once, and exits with
CMD's status.

If someone else holds the lock, coordctl exits 75 at once, naming the holder;
with --wait it first waits up to that long for the lock (coordd bounds
--wait: 1m by default).

CMD gets two variables: COORDD_FENCE, the lock's fencing token, a number
greater than every fence issued before for NAME, and COORDD_LOCK_NAME. The
lock's token is not passed on. Have what the lock protects reject a write
whose fence is lower than the last one it accepted: only that makes the lock
safe, because the lock is a lease.

A lost lease ends the command. coordctl sends CMD SIGTERM, then SIGKILL
after --grace, and exits 70, when while CMD runs:
  - coordd reports the session expired or the lock lost;
  - --max-hold has passed since the lock was granted;
  - no heartbeat has been answered within --ttl of being sent: the stream
    broke and could not be resumed in time, or coordd stopped answering.
    coordctl then cannot know that it still holds the lock, so it counts it
    lost.
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
TTL runs out.

Exit status: CMD's (128+N if signal N killed it); 75 if the lock is held;
70 if the lease was lost; 127 if CMD was not found, 126 if it could not be
started; 69 if coordd is unavailable; 128+N if signal N came before CMD
started.

  coordctl lock --wait 30s db-migrate -- sh -c 'migrate --fence "$COORDD_FENCE"'`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &lockCmd{}
		var failIfHeld bool
		fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "the session's TTL: how long the lease outlives the last answered heartbeat (coordd bounds it: 1s to 5m by default)")
		fs.DurationVar(&c.wait, "wait", 0, "how long to wait for a held lock (0: do not wait, exit 75)")
		fs.StringVar(&c.owner, "owner", "", "a label for the holder, shown to others (default HOSTNAME:PID)")
		fs.DurationVar(&c.maxHold, "max-hold", 0, "end the command once the lock has been held this long (0: no limit)")
		fs.BoolVar(&failIfHeld, "fail-if-held", false, "exit 75 at once if the lock is held (the default; excludes --wait)")
		fs.DurationVar(&c.grace, "grace", 5*time.Second, "after a lost lease, the time between SIGTERM and SIGKILL")
		return func(fs *pflag.FlagSet) (command, error) {
			args, dash := fs.Args(), fs.ArgsLenAtDash()
			switch {
			case dash < 0:
				return nil, usagef("", "missing -- before the command: coordctl lock NAME [flags] -- CMD [ARGS...]")
			case dash == 0:
				return nil, usagef("", "missing NAME before --")
			case dash > 1:
				return nil, usagef("", "unexpected argument %q before -- (one NAME)", args[1])
			case len(args) == 1:
				return nil, usagef("", "missing the command after --")
			case args[0] == "":
				return nil, usagef("", "NAME is empty")
			case args[1] == "":
				return nil, usagef("", "the command is empty")
			case c.ttl <= 0:
				return nil, usagef("", "--ttl is %v; it must be positive", c.ttl)
			case c.wait < 0:
				return nil, usagef("", "--wait is %v; it must not be negative", c.wait)
			case failIfHeld && c.wait > 0:
				return nil, usagef("", "--fail-if-held and --wait %v exclude each other", c.wait)
			case c.maxHold < 0:
				return nil, usagef("", "--max-hold is %v; it must not be negative", c.maxHold)
			case c.grace < 0:
				return nil, usagef("", "--grace is %v; it must not be negative", c.grace)
			}
			c.name, c.argv = args[0], args[1:]
			return c, nil
		}
	},
}

type lockCmd struct {
	name    string
	ttl     time.Duration
	wait    time.Duration
	owner   string // "" means HOSTNAME:PID
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
	// From here on coordctl outlives these signals, to release the lock. A
	// signal ignored at start stays ignored, for coordctl and CMD.
	sigs := make(chan os.Signal, 2*len(forwardedSignals))
	for _, s := range forwardedSignals {
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	defer signal.Stop(sigs)

	sess, err := startSession(ctx, coordv1.NewSessionServiceClient(conn), c.ttl, a.opts.timeout)
	if err != nil {
		return &rpcError{"lock: opening a session", err}
	}
	resp, granted, sig, err := c.acquire(ctx, a, conn, sess.ID(), owner, sigs)
	if sig != nil || err != nil || !resp.GetAcquired() {
		c.endSession(a, sess, a.opts.timeout)
		switch {
		case sig != nil:
			return &exitError{code: 128 + signalNumber(sig), msg: fmt.Sprintf("lock %q: interrupted by %v", c.name, sig)}
		case err != nil:
			return &rpcError{"lock", err}
		}
		if a.opts.json {
			resp.Token = "" // never shown; empty anyway when not acquired
			if err := a.emit(resp, ""); err != nil {
				return err
			}
		}
		return &exitError{code: exitHeld, msg: fmt.Sprintf("lock %q is held by %s; its lease ends in %s",
			c.name, holderName(resp.GetHolder()), fmtDuration(resp.GetTtl()))}
	}
	if lost := sess.Err(); lost != nil {
		c.endSession(a, sess, min(a.opts.timeout, time.Second))
		return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("lock %q: the lease was lost before the command started: %v", c.name, lost)}
	}

	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Env = append(os.Environ(), "COORDD_FENCE="+strconv.FormatUint(resp.GetFence(), 10), "COORDD_LOCK_NAME="+c.name)
	f, ok := a.stdin.(*os.File)
	ownGroup := !ok || !inForeground(f)
	configureChild(cmd, ownGroup)
	if err := cmd.Start(); err != nil {
		c.endSession(a, sess, a.opts.timeout)
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return &exitError{code: code, msg: fmt.Sprintf("lock %q: %v", c.name, err)}
	}
	lostErr, terminated := c.supervise(a, cmd, ownGroup, sess, granted, sigs)

	bound := a.opts.timeout
	if lostErr != nil {
		bound = min(bound, time.Second) // the lease is gone: only tidy up
	}
	if err := sess.Close(bound); err != nil && lostErr == nil {
		fmt.Fprintf(a.stderr, "coordctl: lock %q: %v\n", c.name, err)
	}
	status := exitFailure
	if cmd.ProcessState != nil {
		status = exitStatus(cmd.ProcessState)
	}
	switch {
	case terminated:
		return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("lock %q: the lease was lost while the command ran; the command was terminated (exit status %d)", c.name, status)}
	case lostErr != nil:
		return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("lock %q: the lease was lost as the command exited (exit status %d), so its end may have run without the lock: %v", c.name, status, lostErr)}
	}
	if status != 0 {
		return &exitError{code: status}
	}
	return nil
}

// acquire takes the lock bound to the session, waiting up to --wait. A
// signal abandons the wait and is returned. granted is when the answer came:
// the lock was granted before then.
func (c *lockCmd) acquire(ctx context.Context, a *app, conn *grpc.ClientConn, sessionID, owner string, sigs <-chan os.Signal) (
	resp *coordv1.LockResponse, granted time.Time, sig os.Signal, err error,
) {
	ctx, cancel := a.call(ctx, c.wait)
	defer cancel()
	got := make(chan os.Signal, 1)
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-sigs:
			got <- s
			cancel()
		case <-stop:
		}
	}()
	req := &coordv1.LockRequest{Name: c.name, SessionId: sessionID, Owner: owner}
	if c.wait > 0 {
		req.Wait = durationpb.New(c.wait)
	}
	if c.maxHold > 0 {
		req.MaxHold = durationpb.New(c.maxHold)
	}
	resp, err = coordv1.NewLockServiceClient(conn).Lock(ctx, req)
	granted = time.Now()
	close(stop)
	<-watched
	select {
	case sig = <-got:
	default:
	}
	return resp, granted, sig, err
}

// supervise waits for CMD to exit, passing signals on, and terminates it if
// the lease is lost. It returns why the lease was lost, or nil, and whether
// it terminated CMD for it.
func (c *lockCmd) supervise(a *app, cmd *exec.Cmd, ownGroup bool, sess *session, granted time.Time, sigs <-chan os.Signal) (lostErr error, terminated bool) {
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		close(exited)
	}()
	var (
		lost  = sess.Lost()
		holdC <-chan time.Time
		killC <-chan time.Time
	)
	if c.maxHold > 0 {
		hold := time.NewTimer(time.Until(granted.Add(c.maxHold)))
		defer hold.Stop()
		holdC = hold.C
	}
	terminate := func(why error) {
		lostErr, terminated, lost, holdC = why, true, nil, nil
		fmt.Fprintf(a.stderr, "coordctl: lock %q lost: %v; terminating the command (SIGTERM, then SIGKILL after %v)\n", c.name, why, c.grace)
		if err := signalCommand(cmd.Process, ownGroup, syscall.SIGTERM); err != nil {
			fmt.Fprintf(a.stderr, "coordctl: SIGTERM: %v\n", err)
		}
		kill := time.NewTimer(c.grace)
		killC = kill.C
	}
	for {
		select {
		case <-exited:
			if lostErr != nil && ownGroup {
				// What is left of the group had its SIGTERM too; it holds no lease.
				_ = signalCommand(cmd.Process, true, syscall.SIGKILL)
			}
			if lostErr == nil {
				lostErr = sess.Err() // a loss that came with the exit
			}
			return lostErr, terminated
		case s := <-sigs:
			// In a terminal's foreground, the terminal's own signals reached CMD already.
			if ownGroup || s == syscall.SIGTERM {
				if err := signalCommand(cmd.Process, ownGroup, s); err != nil {
					fmt.Fprintf(a.stderr, "coordctl: passing on %v: %v\n", s, err)
				}
			}
		case <-lost:
			terminate(sess.Err())
		case <-holdC:
			terminate(fmt.Errorf("--max-hold %v has passed since the lock was granted", c.maxHold))
		case <-killC:
			killC = nil
			if err := signalCommand(cmd.Process, ownGroup, syscall.SIGKILL); err != nil {
				fmt.Fprintf(a.stderr, "coordctl: SIGKILL: %v\n", err)
			}
		}
	}
}

// endSession ends the session of a command that did not run, which
// releases the lock if it was taken.
func (c *lockCmd) endSession(a *app, sess *session, bound time.Duration) {
	if err := sess.Close(bound); err != nil {
		fmt.Fprintf(a.stderr, "coordctl: lock %q: %v\n", c.name, err)
	}
}

func holderName(owner string) string {
	if owner == "" {
		return "a holder without an owner label"
	}
	return strconv.Quote(owner)
}
