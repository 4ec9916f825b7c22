package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

func TestParseArgs(t *testing.T) {
	defaults := globalOptions{addr: defaultAddr, timeout: defaultTimeout}
	with := func(f func(*globalOptions)) globalOptions {
		g := defaults
		f(&g)
		return g
	}
	lockDefaults := lockCmd{name: "job", ttl: 10 * time.Second, grace: 5 * time.Second, argv: []string{"make", "-j4"}}
	withLock := func(f func(*lockCmd)) *lockCmd {
		c := lockDefaults
		c.argv = append([]string(nil), c.argv...)
		f(&c)
		return &c
	}
	at := time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)

	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		global globalOptions
		cmd    command
	}{
		{"lock defaults", []string{"lock", "job", "--", "make", "-j4"}, nil, defaults, withLock(func(*lockCmd) {})},
		{"lock flags", []string{"lock", "job", "--ttl", "3s", "--wait=1m", "--owner", "ci #7", "--max-hold", "1h", "--grace", "0s", "--", "make", "-j4"}, nil, defaults,
			withLock(func(c *lockCmd) {
				c.ttl, c.wait, c.owner, c.maxHold, c.grace = 3*time.Second, time.Minute, "ci #7", time.Hour, 0
			})},
		{"lock flags before NAME", []string{"lock", "--wait", "2s", "job", "--", "make", "-j4"}, nil, defaults,
			withLock(func(c *lockCmd) { c.wait = 2 * time.Second })},
		{"lock --fail-if-held", []string{"lock", "--fail-if-held", "job", "--", "make", "-j4"}, nil, defaults, withLock(func(*lockCmd) {})},
		{"lock --shared", []string{"lock", "--shared", "job", "--", "make", "-j4"}, nil, defaults, withLock(func(c *lockCmd) { c.shared = true })},
		{"lock --limit", []string{"lock", "job", "--limit", "3", "--wait", "5m", "--max-wait", "2m", "--", "make", "-j4"}, nil, defaults,
			withLock(func(c *lockCmd) { c.limit, c.wait, c.maxWait = 3, 5*time.Minute, 2*time.Minute })},
		{"elect defaults", []string{"elect", "sched", "--", "make", "-j4"}, nil, defaults,
			&electCmd{name: "sched", ttl: 10 * time.Second, grace: 5 * time.Second, argv: []string{"make", "-j4"}}},
		{"elect flags", []string{"elect", "--value", "host a", "sched", "--ttl", "3s", "--wait", "1h", "--max-wait", "30s", "--grace", "1s", "--", "run", "--value", "x"}, nil, defaults,
			&electCmd{name: "sched", value: "host a", ttl: 3 * time.Second, wait: time.Hour, maxWait: 30 * time.Second, grace: time.Second, argv: []string{"run", "--value", "x"}}},
		{"the command's flags are its own", []string{"lock", "job", "--", "sh", "-c", "x --ttl 1s", "--", "y"}, nil, defaults,
			withLock(func(c *lockCmd) { c.argv = []string{"sh", "-c", "x --ttl 1s", "--", "y"} })},
		{"global flags", []string{"--addr", "coordd:7070", "--api-key", "k-1", "--json", "--timeout", "2s", "get-lock", "job"}, nil,
			with(func(g *globalOptions) {
				g.addr, g.apiKey, g.json, g.timeout = "coordd:7070", "k-1", true, 2*time.Second
			}),
			&getLockCmd{name: "job"}},
		{"environment", []string{"get-lock", "job"}, map[string]string{"COORDCTL_ADDR": "10.0.0.1:1", "COORDCTL_API_KEY": "secret"},
			with(func(g *globalOptions) { g.addr, g.apiKey = "10.0.0.1:1", "secret" }), &getLockCmd{name: "job"}},
		{"flags override the environment", []string{"--addr", "a:1", "--api-key", "flag", "get-lock", "job"},
			map[string]string{"COORDCTL_ADDR": "env:1", "COORDCTL_API_KEY": "env"},
			with(func(g *globalOptions) { g.addr, g.apiKey = "a:1", "flag" }), &getLockCmd{name: "job"}},
		{"TLS files imply --tls", []string{"--ca-file", "ca.pem", "--cert-file", "c.pem", "--key-file", "k.pem", "--server-name", "coordd", "stats", "q"}, nil,
			with(func(g *globalOptions) {
				g.tls, g.caFile, g.certFile, g.keyFile, g.serverName = true, "ca.pem", "c.pem", "k.pem", "coordd"
			}), &statsCmd{queue: "q"}},
		{"--tls alone", []string{"--tls", "stats", "q"}, nil, with(func(g *globalOptions) { g.tls = true }), &statsCmd{queue: "q"}},
		{"release", []string{"release", "job", "abc"}, nil, defaults, &releaseCmd{name: "job", token: "abc"}},
		{"allow by policy", []string{"allow", "user:1", "--policy", "api", "--cost", "3", "--peek"}, nil, defaults,
			&allowCmd{key: "user:1", policy: "api", cost: 3, peek: true}},
		{"allow inline", []string{"allow", "--algorithm", "TOKEN-BUCKET", "--limit", "10", "--period", "1s", "--burst", "20", "user:1"}, nil, defaults,
			&allowCmd{key: "user:1", algorithm: coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, limit: 10, period: time.Second, burst: 20}},
		{"allow, enum name", []string{"allow", "k", "--algorithm", "ALGORITHM_LEAKY_BUCKET", "--limit", "1", "--period", "1m"}, nil, defaults,
			&allowCmd{key: "k", algorithm: coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET, limit: 1, period: time.Minute}},
		{"enqueue", []string{"enqueue", "q", "hello"}, nil, defaults, &enqueueCmd{queue: "q", payload: "hello"}},
		{"enqueue empty", []string{"enqueue", "q"}, nil, defaults, &enqueueCmd{queue: "q"}},
		{"enqueue stdin", []string{"enqueue", "q", "-", "--delay", "5m", "--dedup-id", "d", "--max-attempts", "3"}, nil, defaults,
			&enqueueCmd{queue: "q", fromStdin: true, delay: 5 * time.Minute, dedupID: "d", maxAttempts: 3}},
		{"enqueue --at", []string{"enqueue", "q", "--at", "2030-01-02T15:04:05Z", "x"}, nil, defaults, &enqueueCmd{queue: "q", payload: "x", at: at}},
		{"enqueue a payload that looks like a flag", []string{"enqueue", "q", "--", "--not-a-flag"}, nil, defaults, &enqueueCmd{queue: "q", payload: "--not-a-flag"}},
		{"claim defaults", []string{"claim", "q"}, nil, defaults, &claimCmd{queue: "q", max: 1}},
		{"claim flags", []string{"claim", "q", "--max", "10", "--visibility", "1m", "--wait", "20s"}, nil, defaults,
			&claimCmd{queue: "q", max: 10, visibility: time.Minute, wait: 20 * time.Second}},
		{"ack", []string{"ack", "q", "r"}, nil, defaults, &ackCmd{queue: "q", receipt: "r"}},
		{"nack", []string{"nack", "q", "r"}, nil, defaults, &nackCmd{queue: "q", receipt: "r"}},
		{"nack --delay 0", []string{"nack", "q", "r", "--delay", "0s"}, nil, defaults, &nackCmd{queue: "q", receipt: "r", delaySet: true}},
		{"stats", []string{"stats", "q"}, nil, defaults, &statsCmd{queue: "q"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := parseArgs(tt.args, func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatalf("parseArgs(%q) = %v", tt.args, err)
			}
			if inv.global != tt.global {
				t.Errorf("global options = %+v, want %+v", inv.global, tt.global)
			}
			if !reflect.DeepEqual(inv.cmd, tt.cmd) {
				t.Errorf("command = %#v, want %#v", inv.cmd, tt.cmd)
			}
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the error
		help bool   // a help request, not a usage error
	}{
		{nil, "no command given", false},
		{[]string{"--json"}, "no command given", false},
		{[]string{"nope"}, `unknown command "nope"`, false},
		{[]string{"--addr", "", "stats", "q"}, "--addr is empty", false},
		{[]string{"--api-key", "two words", "stats", "q"}, "--api-key contains", false},
		{[]string{"--key-file", "k.pem", "stats", "q"}, "--cert-file and --key-file go together", false},
		{[]string{"--timeout", "-1s", "stats", "q"}, "--timeout is -1s", false},
		{[]string{"lock"}, "missing -- before the command", false},
		{[]string{"lock", "--", "true"}, "missing NAME before --", false},
		{[]string{"lock", "a", "b", "--", "true"}, `unexpected argument "b" before --`, false},
		{[]string{"lock", "", "--", "true"}, "NAME is empty", false},
		{[]string{"lock", "job", "--", ""}, "the command is empty", false},
		{[]string{"lock", "--ttl", "0s", "job", "--", "true"}, "--ttl is 0s", false},
		{[]string{"lock", "--wait", "-1s", "job", "--", "true"}, "--wait is -1s", false},
		{[]string{"lock", "--max-hold", "-1s", "job", "--", "true"}, "--max-hold is -1s", false},
		{[]string{"lock", "--grace", "-1s", "job", "--", "true"}, "--grace is -1s", false},
		{[]string{"lock", "--wait", "1s", "--fail-if-held", "job", "--", "true"}, "exclude each other", false},
		{[]string{"lock", "--shared", "--limit", "2", "job", "--", "true"}, "--shared and --limit exclude each other", false},
		{[]string{"lock", "--limit", "0", "job", "--", "true"}, "--limit is 0; it must be at least 1", false},
		{[]string{"lock", "--limit", "-2", "job", "--", "true"}, "--limit is -2", false},
		{[]string{"lock", "--max-wait", "-1s", "job", "--", "true"}, "--max-wait is -1s", false},
		{[]string{"elect", "sched"}, "missing -- before the command: coordctl elect NAME", false},
		{[]string{"elect", "--", "true"}, "missing NAME before --", false},
		{[]string{"elect", "a", "b", "--", "true"}, `unexpected argument "b" before --`, false},
		{[]string{"elect", "sched", "--"}, "missing the command after --", false},
		{[]string{"elect", "--value", "", "sched", "--", "true"}, "--value is empty", false},
		{[]string{"elect", "--ttl", "0s", "sched", "--", "true"}, "--ttl is 0s", false},
		{[]string{"elect", "--wait", "-1s", "sched", "--", "true"}, "--wait is -1s", false},
		{[]string{"elect", "--max-wait", "-1s", "sched", "--", "true"}, "--max-wait is -1s", false},
		{[]string{"elect", "--grace", "-1s", "sched", "--", "true"}, "--grace is -1s", false},
		{[]string{"elect", "--shared", "sched", "--", "true"}, "unknown flag: --shared", false},
		{[]string{"get-lock"}, "missing NAME", false},
		{[]string{"get-lock", ""}, "NAME is empty", false},
		{[]string{"release", "job"}, "missing TOKEN", false},
		{[]string{"allow", "k", "--algorithm", "fixed_window"}, "needs --algorithm, --limit and --period", false},
		{[]string{"allow", "k", "--algorithm", "unspecified", "--limit", "1", "--period", "1s"}, `--algorithm "unspecified"`, false},
		{[]string{"allow", "k", "--policy", "p", "--cost", "-1"}, "--cost is -1", false},
		{[]string{"allow", "k", "--policy", "p", "--burst", "2"}, "exclude each other", false},
		{[]string{"enqueue"}, "missing QUEUE", false},
		{[]string{"enqueue", "q", "a", "b"}, `unexpected argument "b"`, false},
		{[]string{"enqueue", "q", "--delay", "-1s"}, "--delay is -1s", false},
		{[]string{"enqueue", "q", "--max-attempts", "-1"}, "--max-attempts is -1", false},
		{[]string{"claim", "q", "--max", "0"}, "--max is 0", false},
		{[]string{"claim", "q", "--wait", "-1s"}, "--wait is -1s", false},
		{[]string{"claim", "q", "--visibility", "-1s"}, "--visibility is -1s", false},
		{[]string{"nack", "q", "r", "--delay", "-1s"}, "--delay is -1s", false},
		{[]string{"ack", "q"}, "missing RECEIPT", false},
		{[]string{"stats", "q", "--max", "1"}, "unknown flag: --max", false},
		{[]string{"-h"}, "", true},
		{[]string{"help"}, "", true},
		{[]string{"help", "claim"}, "", true},
		{[]string{"help", "elect"}, "", true},
		{[]string{"claim", "--help"}, "", true},
	}
	for _, tt := range tests {
		_, err := parseArgs(tt.args, func(string) string { return "" })
		var ue *usageError
		var hr *helpRequest
		switch {
		case tt.help:
			if !errors.As(err, &hr) {
				t.Errorf("parseArgs(%q) = %v, want a help request", tt.args, err)
			}
		case !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want):
			t.Errorf("parseArgs(%q) = %v, want a usage error containing %q", tt.args, err, tt.want)
		}
	}
}

// Every command has help, and every flag it parses is in it.
func TestCommandHelp(t *testing.T) {
	for _, spec := range commands {
		help := commandHelp(spec)
		if !strings.Contains(help, spec.synopsis) || spec.summary == "" || spec.help == "" {
			t.Errorf("%s: help is incomplete:\n%s", spec.name, help)
		}
		if !strings.Contains(mainHelp(), spec.name+" ") {
			t.Errorf("coordctl help does not list %s", spec.name)
		}
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		err  error
		code int
		out  string
	}{
		{nil, 0, ""},
		{usagef("stats", "missing QUEUE"), exitUsage, "coordctl: missing QUEUE (see 'coordctl help stats')\n"},
		{&exitError{code: 7}, 7, ""},
		{&exitError{code: exitHeld, msg: "held"}, exitHeld, "coordctl: held\n"},
		{errors.New("boom"), exitFailure, "coordctl: boom\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		if code := report(&b, tt.err); code != tt.code || b.String() != tt.out {
			t.Errorf("report(%v) = %d, %q; want %d, %q", tt.err, code, b.String(), tt.code, tt.out)
		}
	}
}

func TestVersion(t *testing.T) {
	_, err := parseArgs([]string{"--version"}, func(string) string { return "" })
	var h *helpRequest
	if !errors.As(err, &h) || !strings.HasPrefix(h.text, "coordctl ") || !strings.Contains(h.text, "(revision ") {
		t.Fatalf("parseArgs(--version) = %v, want the version", err)
	}
	if !strings.Contains(mainHelp(), "--version") {
		t.Error("the help does not list --version")
	}
}
