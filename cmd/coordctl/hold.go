package main

// What `lock`, `lock --shared`, `lock --limit` and `elect` share: take one
// hold (a lock, a semaphore permit, a leadership) bound to a session (or,
// for an exclusive lock on a coordd in Redlock mode, which serves no
// sessions, as a plain lease that coordctl renews: lease.go), waiting for
// it in rounds of at most coordd's limits.max_wait, run the command with
// the hold's fence, end the command if the hold is lost, and give the hold
// back when the command ends.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/client"
)

// defaultMaxWait is coordd's default limits.max_wait: the longest wait of
// one call unless --max-wait says otherwise.
const defaultMaxWait = time.Minute

// holdJob is one run of a command under a hold.
type holdJob struct {
	what    string           // "lock", "semaphore", "election": names the hold in messages
	kind    coordv1.HoldKind // the kind of its loss reports on the session's stream
	name    string
	ttl     time.Duration
	wait    time.Duration // in all; 0: one attempt
	maxWait time.Duration // the longest wait of one call; 0: defaultMaxWait
	maxHold time.Duration // 0: none
	grace   time.Duration
	argv    []string
	env     []string // the command's variables besides COORDD_FENCE

	// try makes one attempt, bound to the session (none if sessionID is
	// "": a plain lease of ttl), waiting up to wait.
	try func(ctx context.Context, sessionID string, wait time.Duration) (*attempt, error)
	// renew and release, if set, let the hold be a plain lease when coordd
	// refuses sessions with REDLOCK_MODE: renew extends it to ttl from now
	// (answering the lease granted), release gives it back (answering
	// whether it was still held). Unset, the hold needs a session: needs
	// names the hold in the refusal ("a shared lock (--shared)").
	renew   func(ctx context.Context, token string, ttl time.Duration) (time.Duration, error)
	release func(ctx context.Context, token string) (bool, error)
	needs   string
	// giveBack, if set, gives the hold up before the session ends (an
	// election resigns, so that its log says so before the session goes).
	// An error wrapping errGoneAtEnd says the hold was already gone.
	giveBack func(ctx context.Context, token string) error
	// watch, if set, watches the hold with the fence while the command
	// runs, besides the session: it returns why the hold is lost once it
	// sees that, or nil when ctx ends or it can watch no more.
	watch func(ctx context.Context, fence uint64) error
}

// errGoneAtEnd: giveBack found the hold no longer held, so it was lost at
// some point while the command ran.
var errGoneAtEnd = errors.New("the hold was gone when the command ended")

// attempt is the answer to one try.
type attempt struct {
	acquired bool
	token    string // never shown
	fence    uint64
	ttl      time.Duration // the lease granted (a plain lease's)
	// Not acquired:
	resp      proto.Message // the response, for --json (without a token)
	blockedBy string        // who holds it, quoted, for the progress line
	held      string        // the message of exit 75
}

func (j *holdJob) label() string { return fmt.Sprintf("%s %q", j.what, j.name) }

func (j *holdJob) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	// From here on coordctl outlives these signals, to give the hold back.
	// A signal ignored at start stays ignored, for coordctl and CMD.
	sigs := make(chan os.Signal, 2*len(forwardedSignals))
	for _, s := range forwardedSignals {
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	defer signal.Stop(sigs)

	sess, err := j.startLease(ctx, a, conn)
	if err != nil {
		return err
	}
	att, granted, sig, err := j.acquire(ctx, a, sess, sigs)
	if err == nil && att.acquired {
		sess.granted(att.token, granted, att.ttl)
	}
	if lost := sess.Err(); lost != nil && sig == nil {
		j.endSession(a, sess, min(a.opts.timeout, time.Second))
		return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("%s: the lease was lost before the command started: %v", j.label(), lost)}
	}
	if sig != nil || err != nil || !att.acquired {
		j.endSession(a, sess, a.opts.timeout)
		switch {
		case sig != nil:
			return &exitError{code: 128 + signalNumber(sig), msg: fmt.Sprintf("%s: interrupted by %v", j.label(), sig)}
		case err != nil:
			return &rpcError{j.what, err}
		}
		if a.opts.json {
			if err := a.emit(att.resp, ""); err != nil {
				return err
			}
		}
		return &exitError{code: exitHeld, msg: att.held}
	}

	cmd := exec.Command(j.argv[0], j.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Env = append(append(os.Environ(), "COORDD_FENCE="+strconv.FormatUint(att.fence, 10)), j.env...)
	f, ok := a.stdin.(*os.File)
	ownGroup := !ok || !inForeground(f)
	configureChild(cmd, ownGroup)
	if err := cmd.Start(); err != nil {
		j.endSession(a, sess, a.opts.timeout)
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return &exitError{code: code, msg: fmt.Sprintf("%s: %v", j.label(), err)}
	}
	watchLost, stopWatch := j.startWatch(ctx, att.fence)
	lostErr, terminated := j.supervise(a, cmd, ownGroup, sess, granted, sigs, watchLost)
	stopWatch()

	bound := a.opts.timeout
	if lostErr != nil {
		bound = min(bound, time.Second) // the lease is gone: only tidy up
	} else if j.giveBack != nil {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
		switch err := j.giveBack(gctx, att.token); {
		case errors.Is(err, errGoneAtEnd):
			lostErr = err
		case err != nil:
			// Ending the session below gives it back too.
			fmt.Fprintf(a.stderr, "coordctl: %s: %v\n", j.label(), err)
		}
		cancel()
	}
	if err := sess.Close(bound); err != nil && lostErr == nil {
		if errors.Is(err, errGoneAtEnd) {
			lostErr = err
		} else {
			fmt.Fprintf(a.stderr, "coordctl: %s: %v\n", j.label(), err)
		}
	}
	status := exitFailure
	if cmd.ProcessState != nil {
		status = exitStatus(cmd.ProcessState)
	}
	switch {
	case terminated:
		return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("%s: the lease was lost while the command ran; the command was terminated (exit status %d)", j.label(), status)}
	case lostErr != nil:
		return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("%s: the lease was lost as the command exited (exit status %d), so its end may have run without the %s: %v", j.label(), status, j.what, lostErr)}
	}
	if status != 0 {
		return &exitError{code: status}
	}
	return nil
}

// startLease opens the session that the hold is bound to. A coordd in
// Redlock mode serves no sessions (REDLOCK_MODE): an exclusive lock is then
// held as a plain lease (plainLease), and any other hold is refused,
// saying why.
func (j *holdJob) startLease(ctx context.Context, a *app, conn *grpc.ClientConn) (keeper, error) {
	sess, err := startSession(ctx, conn, holdRef{j.kind, j.name}, j.ttl, a.opts.timeout)
	switch {
	case err == nil:
		return sess, nil
	case !redlockMode(err):
		return nil, &rpcError{j.what + ": opening a session", err}
	case j.renew == nil:
		return nil, &rpcError{fmt.Sprintf("%s: coordd runs in Redlock mode, which serves exclusive locks only, without sessions: not %s", j.label(), j.needs), err}
	}
	return newPlainLease(j, a.opts.timeout), nil
}

// acquire takes the hold bound to the session, waiting up to --wait in
// calls of at most the server's max wait, and printing a progress line
// between them. A signal abandons the wait and is returned; so does a lost
// session (err is then nil and sess.Err says why). granted is when the
// request that was granted was sent: the grant came after it, so a
// --max-hold counted from then ends no later than coordd's.
func (j *holdJob) acquire(ctx context.Context, a *app, sess keeper, sigs <-chan os.Signal) (
	att *attempt, granted time.Time, sig os.Signal, err error,
) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan os.Signal, 1)
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-sigs:
			got <- s
			cancel()
		case <-sess.Lost():
			cancel()
		case <-stop:
		}
	}()
	defer func() {
		close(stop)
		<-watched
		select {
		case sig = <-got:
		default:
		}
	}()

	deadline := time.Now().Add(j.wait)
	progress := startProgress(a, j.name, deadline, j.wait > 0)
	defer progress.stop()
	chunk := j.maxWait
	if chunk <= 0 {
		chunk = defaultMaxWait
	}
	for {
		w := min(max(time.Until(deadline), 0), chunk)
		if j.wait == 0 {
			w = 0
		}
		callCtx, callCancel := a.call(ctx, w)
		granted = time.Now()
		att, err = j.try(callCtx, sess.ID(), w)
		callCancel()
		if err != nil {
			if w > time.Millisecond && waitOverLimit(err) && ctx.Err() == nil {
				// coordd's limits.max_wait is lower than chunk: it names it;
				// an older coordd does not, so halve until under it.
				if l := client.WaitLimit(err); l > 0 && l < w {
					chunk = l
				} else {
					chunk = w / 2
				}
				continue
			}
			return att, granted, sig, err
		}
		left := time.Until(deadline)
		if att.acquired || ctx.Err() != nil || j.wait == 0 || left <= 0 {
			return att, granted, sig, nil
		}
		progress.round(att.blockedBy, left)
	}
}

// waitOverLimit reports whether err is coordd's INVALID_ARGUMENT for a wait
// over its limits.max_wait (named by the ErrorInfo's field).
func waitOverLimit(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetMetadata()["field"] == "wait" {
			return true
		}
	}
	return false
}

// supervise waits for CMD to exit, passing signals on, and terminates it if
// the lease is lost. It returns why the lease was lost, or nil, and whether
// it terminated CMD for it.
func (j *holdJob) supervise(a *app, cmd *exec.Cmd, ownGroup bool, sess keeper, granted time.Time, sigs <-chan os.Signal, watchLost <-chan error) (lostErr error, terminated bool) {
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
	if j.maxHold > 0 {
		hold := time.NewTimer(time.Until(granted.Add(j.maxHold)))
		defer hold.Stop()
		holdC = hold.C
	}
	terminate := func(why error) {
		lostErr, terminated, lost, holdC = why, true, nil, nil
		fmt.Fprintf(a.stderr, "coordctl: %s lost: %v; terminating the command (SIGTERM, then SIGKILL after %v)\n", j.label(), why, j.grace)
		if err := signalCommand(cmd.Process, ownGroup, syscall.SIGTERM); err != nil {
			fmt.Fprintf(a.stderr, "coordctl: SIGTERM: %v\n", err)
		}
		kill := time.NewTimer(j.grace)
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
		case err := <-watchLost:
			watchLost = nil
			if lost != nil { // not lost already
				terminate(err)
			}
		case <-holdC:
			terminate(fmt.Errorf("--max-hold %v has passed since the %s was granted", j.maxHold, j.what))
		case <-killC:
			killC = nil
			if err := signalCommand(cmd.Process, ownGroup, syscall.SIGKILL); err != nil {
				fmt.Fprintf(a.stderr, "coordctl: SIGKILL: %v\n", err)
			}
		}
	}
}

// startWatch runs j.watch, if any, until stop. lost gets what it found.
func (j *holdJob) startWatch(ctx context.Context, fence uint64) (lost <-chan error, stop func()) {
	if j.watch == nil {
		return nil, func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	found, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		if err := j.watch(ctx, fence); err != nil && ctx.Err() == nil {
			found <- err
		}
	}()
	return found, func() {
		cancel()
		<-done
	}
}

// endSession ends the session (or the plain lease) of a command that did
// not run, which gives the hold back if it was taken.
func (j *holdJob) endSession(a *app, sess keeper, bound time.Duration) {
	if err := sess.Close(bound); err != nil {
		fmt.Fprintf(a.stderr, "coordctl: %s: %v\n", j.label(), err)
	}
}

func holderName(owner string) string {
	if owner == "" {
		return "a holder without an owner label"
	}
	return strconv.Quote(owner)
}

// optDuration is d as a request field: unset when 0.
func optDuration(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

// progress reports a wait on stderr. In a terminal's foreground it keeps one
// line, rewritten every second, of whom coordctl waits for and how long is
// left; elsewhere (a log, a pipe) it writes one line per round of the wait,
// so that a log is not filled with carriage returns.
type progress struct {
	a        *app
	name     string
	deadline time.Time
	tty      bool
	mu       sync.Mutex
	holder   string
	done     chan struct{}
	stopped  chan struct{}
}

func startProgress(a *app, name string, deadline time.Time, waiting bool) *progress {
	p := &progress{a: a, name: name, deadline: deadline}
	f, ok := a.stderr.(*os.File)
	p.tty = waiting && ok && inForeground(f)
	if p.tty {
		p.done, p.stopped = make(chan struct{}), make(chan struct{})
		go p.tick()
	}
	return p
}

func (p *progress) tick() {
	defer close(p.stopped)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			fmt.Fprint(p.a.stderr, "\r\x1b[K")
			return
		case <-t.C:
			p.mu.Lock()
			holder := p.holder
			p.mu.Unlock()
			if holder == "" {
				holder = "another"
			}
			fmt.Fprintf(p.a.stderr, "\r\x1b[Kcoordctl: waiting for %q, held by %s (%v of --wait left)",
				p.name, holder, max(time.Until(p.deadline), 0).Round(time.Second))
		}
	}
}

// round records the end of a round of the wait: blockedBy held the name.
func (p *progress) round(blockedBy string, left time.Duration) {
	if p.tty {
		p.mu.Lock()
		p.holder = blockedBy
		p.mu.Unlock()
		return
	}
	fmt.Fprintf(p.a.stderr, "coordctl: waiting for %q, held by %s (%v of --wait left)\n",
		p.name, blockedBy, left.Round(time.Second))
}

func (p *progress) stop() {
	if p.tty {
		close(p.done)
		<-p.stopped
	}
}
