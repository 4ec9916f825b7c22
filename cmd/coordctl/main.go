// Command coordctl is a small command-line client of coordd, for humans and
// shell scripts. It runs a command while holding a lock, and calls the lock,
// rate-limit and queue RPCs one at a time.
//
// Global flags go before the command:
//
//	coordctl [--addr HOST:PORT] [--api-key KEY] [--tls] [--json] ... COMMAND [flags] [args]
//
// Examples:
//
//	# Run a job on one host of a fleet at a time; elsewhere, exit 75 at once.
//	coordctl lock nightly-report -- ./report.sh
//
//	# Wait up to 30s for the lock; pass its fence to what the lock protects.
//	coordctl lock --wait 30s db-migrate -- sh -c 'migrate --fence "$COORDD_FENCE"'
//
//	# At most 4 builds at once (a semaphore); readers share a lock.
//	coordctl lock --limit 4 --wait 1h builds -- make
//	coordctl lock --shared --wait 1m dataset -- ./read.sh
//
//	# Run the scheduler on the elected host only, until it loses the leadership.
//	coordctl elect --wait 8760h scheduler -- ./scheduler
//
//	# At most 10 per second, from a shell loop.
//	until coordctl allow user:42 --algorithm token_bucket --limit 10 --period 1s; do sleep 0.1; done
//
//	# A work queue from the shell.
//	coordctl enqueue emails --delay 5m '{"to":"a@example.com"}'
//	coordctl --json claim emails --wait 20s | jq -r '.messages[].receipt'
//	coordctl ack emails "$RECEIPT"
//
// `coordctl lock` and `coordctl elect` hold their lock, permit or
// leadership as a lease: they keep a session alive with heartbeats while the
// command runs (against a coordd in Redlock mode, which serves no sessions,
// `lock` renews a plain lease instead), and terminate the command if the
// lease is lost (see `coordctl help lock`).
//
// Exit status: 0 on success; 1 on a failure, a denied `allow` or a `release`
// that released nothing; 2 on a usage error; 69 when coordd is unavailable;
// 75 when `lock` finds the lock held (or the semaphore full) or `elect`
// another leader; 70 when `lock` or `elect` lost its lease while the command
// ran; otherwise they exit with the command's status (128+N if it was killed
// by signal N).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/internal/version"
)

// Exit statuses; see the package documentation.
const (
	exitFailure     = 1
	exitUsage       = 2
	exitUnavailable = 69 // EX_UNAVAILABLE: coordd answered UNAVAILABLE or could not be reached
	exitLeaseLost   = 70 // lock, elect: the lease ended while the command ran; the command was terminated
	exitHeld        = 75 // EX_TEMPFAIL: lock: someone else holds the lock (the semaphore is full); elect: another leads
)

const (
	defaultAddr    = "127.0.0.1:7070"
	defaultTimeout = 10 * time.Second
)

func main() {
	// SIGINT and SIGTERM cancel ctx, with the signal as its cause. A signal
	// ignored at start stays ignored (sh starts background jobs with SIGINT
	// ignored), for coordctl and for the command `lock` runs.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, slices.DeleteFunc([]os.Signal{os.Interrupt, syscall.SIGTERM}, signal.Ignored)...)
	go func() { cancel(&interrupted{sig: <-sigs}) }()
	err := run(ctx, os.Args[1:])
	os.Exit(report(os.Stderr, err))
}

// interrupted is the cause of the context of a run ended by a signal.
type interrupted struct{ sig os.Signal }

func (e *interrupted) Error() string { return "interrupted by " + e.sig.String() }

// run parses args and runs the command they name. Its error says how to
// exit (see report).
func run(ctx context.Context, args []string) error {
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	return a.run(ctx, args, os.Getenv)
}

// app is one invocation: its streams and global options.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	opts           globalOptions
}

func (a *app) run(ctx context.Context, args []string, getenv func(string) string) error {
	inv, err := parseArgs(args, getenv)
	if err != nil {
		var h *helpRequest
		if errors.As(err, &h) {
			_, err = io.WriteString(a.stdout, h.text)
			return err
		}
		return err
	}
	a.opts = inv.global
	conn, err := inv.global.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	err = inv.cmd.run(ctx, a, conn)
	var intr *interrupted
	if err != nil && status.Code(err) == codes.Canceled && errors.As(context.Cause(ctx), &intr) {
		return &exitError{code: 128 + signalNumber(intr.sig), msg: intr.Error()}
	}
	return err
}

// globalOptions are the flags before the command.
type globalOptions struct {
	addr       string
	apiKey     string
	token      string // a lock's or an idempotency key's owner token
	tls        bool
	caFile     string
	certFile   string
	keyFile    string
	serverName string
	timeout    time.Duration
	json       bool
	version    bool
}

// invocation is a parsed command line.
type invocation struct {
	global globalOptions
	cmd    command
}

// helpRequest is returned by parseArgs for -h, --help and `help`: text goes
// to stdout and coordctl exits 0.
type helpRequest struct{ text string }

func (h *helpRequest) Error() string { return "help requested" }

// usageError is a bad command line: exit status 2.
type usageError struct {
	cmd string // the command, or "" for the global part
	msg string
}

func (e *usageError) Error() string {
	hint := "coordctl help"
	if e.cmd != "" {
		hint += " " + e.cmd
	}
	return e.msg + " (see '" + hint + "')"
}

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// exitError ends coordctl with code, printing msg (if any) to stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.msg
}

// rpcError is a failed RPC: op names what was being done.
type rpcError struct {
	op  string
	err error
}

func (e *rpcError) Error() string { return e.op + ": " + describeStatus(e.err) }
func (e *rpcError) Unwrap() error { return e.err }

// describeStatus formats a gRPC error as CODE (REASON): message.
func describeStatus(err error) string { return client.Describe(err) }

// report prints err to w and returns the exit status it calls for.
func report(w io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var (
		ue *usageError
		ee *exitError
		re *rpcError
	)
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(w, "coordctl:", ue)
		return exitUsage
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(w, "coordctl:", ee.msg)
		}
		return ee.code
	case errors.As(err, &re):
		fmt.Fprintln(w, "coordctl:", re)
		if status.Code(re.err) == codes.Unavailable {
			return exitUnavailable
		}
		return exitFailure
	default:
		fmt.Fprintln(w, "coordctl:", err)
		return exitFailure
	}
}

// parseArgs parses the global flags, then the command and its flags and
// arguments. getenv supplies the COORDCTL_* defaults.
func parseArgs(args []string, getenv func(string) string) (*invocation, error) {
	var g globalOptions
	fs := newFlagSet("coordctl")
	fs.SetInterspersed(false) // global flags end at the command
	addGlobalFlags(fs, &g, getenv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, &helpRequest{text: mainHelp()}
		}
		return nil, usagef("", "%v", err)
	}
	if g.version {
		return nil, &helpRequest{text: version.String("coordctl") + "\n"}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, usagef("", "no command given")
	}
	if rest[0] == "help" {
		return nil, helpFor(rest[1:])
	}
	spec := findCommand(rest[0])
	if spec == nil {
		return nil, usagef("", "unknown command %q", rest[0])
	}
	cfs := newFlagSet("coordctl " + spec.name)
	finish := spec.setup(cfs)
	if err := cfs.Parse(rest[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, &helpRequest{text: commandHelp(spec)}
		}
		return nil, usagef(spec.name, "%v", err)
	}
	cmd, err := finish(cfs)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) && ue.cmd == "" {
			ue.cmd = spec.name
		}
		return nil, err
	}
	if err := g.validate(); err != nil {
		return nil, err
	}
	return &invocation{global: g, cmd: cmd}, nil
}

func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned and reported once, by report
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

func addGlobalFlags(fs *pflag.FlagSet, g *globalOptions, getenv func(string) string) {
	addr := getenv("COORDCTL_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	fs.StringVar(&g.addr, "addr", addr, "coordd's gRPC address, HOST:PORT (env COORDCTL_ADDR)")
	fs.StringVar(&g.token, "token", getenv("COORDCTL_TOKEN"),
		"the token of renew, idem-finish and idem-extend (env COORDCTL_TOKEN; a flag's value is visible in ps, the variable's is not)")
	fs.StringVar(&g.apiKey, "api-key", getenv("COORDCTL_API_KEY"),
		"API key, sent as 'authorization: Bearer KEY' (env COORDCTL_API_KEY, which keeps it out of ps)")
	fs.BoolVar(&g.tls, "tls", false, "connect with TLS (without it, the API key travels in clear)")
	fs.StringVar(&g.caFile, "ca-file", "", "PEM file of the CA that signed coordd's certificate (default: the system's); implies --tls")
	fs.StringVar(&g.certFile, "cert-file", "", "PEM client certificate for mutual TLS (with --key-file); implies --tls")
	fs.StringVar(&g.keyFile, "key-file", "", "PEM private key of --cert-file")
	fs.StringVar(&g.serverName, "server-name", "", "name to verify in coordd's certificate (default: the host of --addr); implies --tls")
	fs.DurationVar(&g.timeout, "timeout", defaultTimeout, "limit of each call, on top of any --wait")
	fs.BoolVar(&g.json, "json", false, "print responses as JSON (protojson, one line) instead of a short line")
	fs.BoolVar(&g.version, "version", false, "print coordctl's version and exit")
}

func (g *globalOptions) validate() error {
	if g.addr == "" {
		return usagef("", "--addr is empty")
	}
	if g.timeout <= 0 {
		return usagef("", "--timeout is %v; it must be positive", g.timeout)
	}
	if (g.certFile == "") != (g.keyFile == "") {
		return usagef("", "--cert-file and --key-file go together")
	}
	if g.caFile != "" || g.certFile != "" || g.serverName != "" {
		g.tls = true
	}
	for _, r := range g.apiKey {
		if r <= ' ' || r > '~' {
			return usagef("", "--api-key contains %q; an API key is printable ASCII without spaces", r)
		}
	}
	return nil
}

func mainHelp() string {
	var b strings.Builder
	b.WriteString(`coordctl is a command-line client of coordd.

Usage:
  coordctl [global flags] COMMAND [flags] [args]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString("  help       help about a command: coordctl help COMMAND\n\nGlobal flags:\n")
	fs := newFlagSet("coordctl")
	var g globalOptions
	addGlobalFlags(fs, &g, func(string) string { return "" })
	b.WriteString(fs.FlagUsages())
	b.WriteString(`
Exit status:
  0   success
  1   failure; also a denied allow, a release that released nothing
  2   usage error
  69  coordd unavailable (gRPC UNAVAILABLE, or not reachable)
  70  lock, elect: the lease was lost while the command ran, and the command was terminated
  75  lock: the lock is held by someone else (or the semaphore is full); elect: another leads
  lock and elect otherwise exit with the command's status (128+N if a signal N killed it).

Errors are printed to stderr as CODE (REASON): message, with the gRPC status
code and the reason of its google.rpc.ErrorInfo.
`)
	return b.String()
}

func helpFor(args []string) error {
	if len(args) == 0 {
		return &helpRequest{text: mainHelp()}
	}
	spec := findCommand(args[0])
	if spec == nil {
		return usagef("", "unknown command %q", args[0])
	}
	return &helpRequest{text: commandHelp(spec)}
}

func commandHelp(spec *commandSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  coordctl [global flags] %s\n\n%s\n", spec.synopsis, strings.TrimSpace(spec.help))
	fs := newFlagSet(spec.name)
	spec.setup(fs)
	if fs.HasFlags() {
		b.WriteString("\nFlags:\n")
		b.WriteString(fs.FlagUsages())
	}
	b.WriteString("\nGlobal flags: see 'coordctl help'.\n")
	return b.String()
}
