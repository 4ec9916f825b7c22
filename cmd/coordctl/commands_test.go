package main

import (
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestAllow(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	limit := []string{"--algorithm", "fixed_window", "--limit", "2", "--period", "1h"}
	allow := func(extra ...string) result {
		return c.run(append(append([]string{"allow", "user:42"}, limit...), extra...)...)
	}
	want(t, allow("--peek"), 0, "allowed remaining=1 limit=2", "")
	want(t, allow(), 0, "allowed remaining=1 limit=2", "")
	want(t, allow(), 0, "allowed remaining=0 limit=2", "")
	r := allow()
	want(t, r, 1, "denied retry_after=", "")
	if r.stderr != "" {
		t.Errorf("a denial printed to stderr: %q; a denial is an answer, not an error", r.stderr)
	}
	if m := regexp.MustCompile(`retry_after=(\S+)`).FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("no retry_after in %q", r.stdout)
	} else if d, err := time.ParseDuration(m[1]); err != nil || d <= 0 || d > time.Hour {
		t.Errorf("retry_after=%s; want a duration in (0, 1h]", m[1])
	}

	r = c.run(append(append([]string{"--json", "allow", "user:42"}, limit...), "--cost", "1")...)
	want(t, r, 1, "", "")
	if m := jsonOut(t, r); m["allowed"] != false || m["retryAfter"] == nil || m["limit"] != "2" {
		t.Errorf("--json allow when denied = %v; want allowed false, a retryAfter and limit 2", m)
	}
	// The same key under another limit is another limiter.
	want(t, c.run("allow", "user:42", "--algorithm", "token-bucket", "--limit", "5", "--period", "1s"), 0, "allowed remaining=4 limit=5", "")
	// No such policy in coordd's configuration.
	want(t, c.run("allow", "user:42", "--policy", "nope"), 1, "", "INVALID_ARGUMENT (INVALID_ARGUMENT): policy:")

	// --wait: denied now, allowed when the leaky bucket lets one more in.
	leaky := []string{"allow", "w", "--algorithm", "leaky_bucket", "--limit", "1", "--period", "300ms"}
	want(t, c.run(leaky...), 0, "allowed", "")
	want(t, c.run(append(leaky, "--wait", "5s")...), 0, "allowed", "")
	want(t, c.run(append(leaky, "--wait", "1ms")...), 1, "denied retry_after=", "")
	want(t, c.run(append(leaky, "--wait", "1s", "--peek")...), 2, "", "--wait")
}

var receiptRE = regexp.MustCompile(`message_id=(\S+) attempt=(\d+) receipt=(\S+) payload=(.*)`)

func TestQueueRoundTrip(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	r := c.run("enqueue", "jobs", "hello world")
	want(t, r, 0, "message_id=", "")
	id := regexp.MustCompile(`message_id=(\S+)`).FindStringSubmatch(r.stdout)[1]
	want(t, c.run("stats", "jobs"), 0, "ready=1 delayed=0 in_flight=0 dead=0", "")

	r = c.run("claim", "jobs", "--visibility", "1m")
	want(t, r, 0, "message_id="+id+" attempt=1 receipt=", "")
	m := receiptRE.FindStringSubmatch(r.stdout)
	if m == nil || m[4] != `"hello world"` {
		t.Fatalf("claim printed %q; want the message with its quoted payload", r.stdout)
	}
	receipt := m[3]
	want(t, c.run("stats", "jobs"), 0, "ready=0 delayed=0 in_flight=1 dead=0", "")
	want(t, c.run("ack", "jobs", receipt), 0, "acked", "")
	want(t, c.run("stats", "jobs"), 0, "ready=0 delayed=0 in_flight=0 dead=0", "")
	// A second ack: the claim is over.
	want(t, c.run("ack", "jobs", receipt), 1, "", "coordctl: ack: FAILED_PRECONDITION (RECEIPT_EXPIRED): ")

	// Nothing to claim.
	want(t, c.run("claim", "jobs"), 0, "", "no message ready")

	// From stdin, with a dedup ID; then a long-polling claim and a nack.
	stdinCtl := c
	stdinCtl.stdin = "line 1\nline 2\n"
	r = stdinCtl.run("enqueue", "jobs", "--dedup-id", "d1", "--max-attempts", "3", "-")
	want(t, r, 0, "message_id=", "")
	if strings.Contains(r.stdout, "duplicate") {
		t.Errorf("first enqueue with a dedup ID printed %q", r.stdout)
	}
	want(t, stdinCtl.run("enqueue", "jobs", "--dedup-id", "d1", "-"), 0, " duplicate", "")
	r = c.run("claim", "jobs", "--wait", "5s", "--max", "10")
	m = receiptRE.FindStringSubmatch(r.stdout)
	if m == nil || m[4] != `"line 1\nline 2\n"` || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("claim printed %q; want one message with stdin's payload", r.stdout)
	}
	want(t, c.run("nack", "jobs", m[3], "--delay", "1h"), 0, "nacked deliver_time=", "")
	want(t, c.run("stats", "jobs"), 0, "ready=0 delayed=1 in_flight=0 dead=0", "")

	// Delayed by --delay and by --at.
	want(t, c.run("enqueue", "later", "--delay", "1h", "x"), 0, "message_id=", "")
	want(t, c.run("enqueue", "later", "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "y"), 0, "message_id=", "")
	want(t, c.run("stats", "later"), 0, "ready=0 delayed=2", "")

	// Priorities and groups.
	want(t, c.run("enqueue", "pg", "--group", "g", "first"), 0, "message_id=", "")
	want(t, c.run("enqueue", "pg", "--group", "g", "--priority", "9", "second"), 0, "message_id=", "")
	want(t, c.run("enqueue", "pg", "--priority", "5", "urgent"), 0, "message_id=", "")
	r = c.run("claim", "pg", "--max", "10")
	if strings.Count(r.stdout, "\n") != 2 || !strings.Contains(strings.SplitN(r.stdout, "\n", 2)[0], `"urgent"`) ||
		!strings.Contains(r.stdout, `"first"`) {
		t.Errorf("claim printed %q; want urgent (priority 5), then first (its group's head), not second", r.stdout)
	}
	want(t, c.run("enqueue", "pg", "--priority", "10", "x"), 1, "", "priority")

	// A long poll that a later enqueue ends.
	p := c.start("claim", "wakeup", "--wait", "20s")
	time.Sleep(300 * time.Millisecond)
	want(t, c.run("enqueue", "wakeup", "now"), 0, "message_id=", "")
	r = p.wait(10 * time.Second)
	want(t, r, 0, `payload="now"`, "")
	if r.took > 10*time.Second {
		t.Errorf("the long poll took %v", r.took)
	}
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	inline := []string{"--algorithm", "sliding_log", "--limit", "1", "--period", "1m"}
	for _, tt := range []struct {
		args  []string
		code  int
		field string
	}{
		{[]string{"get-lock", "free"}, 0, "held"},
		{[]string{"release", "free", "0123456789abcdef0123456789abcdef"}, 1, "released"},
		{append([]string{"allow", "k"}, inline...), 0, "allowed"},
		{append([]string{"allow", "k"}, inline...), 1, "retryAfter"},
		{[]string{"enqueue", "q", "payload"}, 0, "messageId"},
		{[]string{"stats", "q"}, 0, "ready"},
		{[]string{"claim", "q"}, 0, "messages"},
		{[]string{"claim", "q"}, 0, "messages"}, // none left: an empty list
	} {
		r := c.run(append([]string{"--json"}, tt.args...)...)
		if r.code != tt.code {
			t.Errorf("%q: %v; want exit %d", tt.args, r, tt.code)
			continue
		}
		if strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("%q printed %q; want one line", tt.args, r.stdout)
		}
		if m := jsonOut(t, r); m[tt.field] == nil {
			t.Errorf("%q printed %v; want a %q field", tt.args, m, tt.field)
		}
	}

	// A claimed message, acked and nacked, in JSON.
	want(t, c.run("enqueue", "q2", "x"), 0, "", "")
	r := c.run("--json", "claim", "q2")
	var claim struct {
		Messages []struct {
			MessageID string `json:"messageId"`
			Receipt   string `json:"receipt"`
			Payload   []byte `json:"payload"` // base64 in protojson
			Attempt   int    `json:"attempt"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &claim); err != nil || len(claim.Messages) != 1 {
		t.Fatalf("--json claim = %q (%v); want one message", r.stdout, err)
	}
	if msg := claim.Messages[0]; string(msg.Payload) != "x" || msg.Attempt != 1 || msg.Receipt == "" {
		t.Errorf("--json claim's message = %+v", msg)
	}
	r = c.run("--json", "ack", "q2", claim.Messages[0].Receipt)
	if m := jsonOut(t, r); m["acked"] != true {
		t.Errorf("--json ack = %v", m)
	}
}

func TestGetLockAndRelease(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	want(t, c.run("get-lock", "free"), 0, "not held", "")
	want(t, c.run("release", "free", "0123456789abcdef0123456789abcdef"), 1, "not released", `the token does not hold lock "free"`)
}

func TestRPCErrors(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	// Bad input: the code, the ErrorInfo reason and the message naming the field.
	want(t, c.run("claim", "q", "--visibility", "100h"), 1, "",
		"coordctl: claim: INVALID_ARGUMENT (INVALID_ARGUMENT): visibility_timeout: ")
	want(t, c.run("lock", "--ttl", "100ms", "job", "--", "true"), 1, "", "INVALID_ARGUMENT (INVALID_ARGUMENT): ttl: ")

	down := ctl{t: t, addr: closedAddr(t), dir: t.TempDir()}
	for _, args := range [][]string{{"get-lock", "x"}, {"stats", "q"}, {"allow", "k", "--policy", "p"}} {
		want(t, down.run(args...), exitUnavailable, "", ": UNAVAILABLE: ")
	}
	r := down.run("--timeout", "300ms", "claim", "q")
	want(t, r, exitUnavailable, "", "UNAVAILABLE")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	c := ctl{t: t, addr: closedAddr(t), dir: t.TempDir()} // never reached
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{nil, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"--no-such-flag", "stats", "q"}, "unknown flag: --no-such-flag"},
		{[]string{"stats"}, "missing QUEUE (see 'coordctl help stats')"},
		{[]string{"stats", "q", "extra"}, `unexpected argument "extra"`},
		{[]string{"lock", "job", "true"}, "missing -- before the command"},
		{[]string{"lock", "job", "--"}, "missing the command after --"},
		{[]string{"lock", "--ttl", "soon", "job", "--", "true"}, `invalid argument "soon" for "--ttl"`},
		{[]string{"lock", "--wait", "5s", "--fail-if-held", "job", "--", "true"}, "exclude each other"},
		{[]string{"lock", "--shared", "--limit", "3", "job", "--", "true"}, "--shared and --limit exclude each other"},
		{[]string{"elect", "sched", "true"}, "coordctl elect NAME [flags] -- CMD [ARGS...] (see 'coordctl help elect')"},
		{[]string{"allow", "k"}, "give --policy or an inline limit"},
		{[]string{"allow", "k", "--policy", "p", "--limit", "3"}, "exclude each other"},
		{[]string{"allow", "k", "--algorithm", "quadratic", "--limit", "1", "--period", "1s"}, `--algorithm "quadratic"`},
		{[]string{"enqueue", "q", "--delay", "1s", "--at", "2030-01-01T00:00:00Z", "x"}, "--delay and --at exclude each other"},
		{[]string{"enqueue", "q", "--at", "tomorrow", "x"}, "not an RFC 3339 time"},
		{[]string{"--cert-file", "c.pem", "stats", "q"}, "--cert-file and --key-file go together"},
		{[]string{"--timeout", "0s", "stats", "q"}, "--timeout is 0s"},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
	} {
		r := c.run(tt.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.stderr) || r.stdout != "" {
			t.Errorf("coordctl %q: %v\nwant exit 2 and stderr containing %q", tt.args, r, tt.stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	c := ctl{t: t, dir: t.TempDir()}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Commands:", "lock", "--addr", "COORDCTL_ADDR", "75"}},
		{[]string{"help"}, []string{"Commands:"}},
		{[]string{"help", "lock"}, []string{"lease", "COORDD_FENCE", "SIGKILL", "--grace", "exits 70"}},
		{[]string{"lock", "-h"}, []string{"--max-hold", "--shared", "--limit", "--max-wait", "waiting for NAME, held by OWNER"}},
		{[]string{"help", "elect"}, []string{"--value", "COORDD_FENCE", "COORDD_ELECTION_NAME", "resigns", "exit 70"}},
		{[]string{"allow", "--help"}, []string{"--algorithm", "retry_after"}},
	} {
		r := c.run(tt.args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("coordctl %q: %v; want exit 0", tt.args, r)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("coordctl %q does not mention %q:\n%s", tt.args, w, r.stdout)
			}
		}
	}
}
