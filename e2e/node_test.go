package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/redistest"
)

// nodeClientDir holds the Node.js client test, relative to this package.
var nodeClientDir = filepath.Join("..", "clients", "node")

const (
	npmCITimeout    = 3 * time.Minute  // npm ci, from the npm registry or its cache
	nodeTestTimeout = 60 * time.Second // node --test test.js
)

// TestNodeClient runs clients/node/test.js, @grpc/grpc-js with the .proto
// files of api/proto, against a coordd on the memory store: locks, rate
// limits, idempotency keys, the queue, a KeepAlive stream, the package's
// Session helper (a resume after its TCP connection is cut, through a proxy
// in test.js), its retries of OVERLOADED against a coordd with
// limits.max_sessions 1, and an error's google.rpc.ErrorInfo, all from outside
// Go. It needs Node.js and npm (npm
// ci installs clients/node's locked dependencies when they are missing): a
// machine without node skips it, CI fails it.
func TestNodeClient(t *testing.T) {
	node := lookTool(t, "node")
	if out, err := exec.Command(node, "--version").Output(); err == nil {
		t.Logf("node %s", strings.TrimSpace(string(out)))
	}
	npmCI(t)

	in := startMemoryInstance(t, "memory")
	one := startCoordd(t, "one-session", []string{"--store", "memory"}, "COORDD_LIMITS_MAX_SESSIONS=1")
	ctx, cancel := context.WithTimeout(t.Context(), nodeTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", "test.js")
	cmd.Dir = nodeClientDir
	cmd.Env = environWithout("COORDD_")
	cmd.Env = append(cmd.Env, "COORDD_ADDR="+in.GRPCAddr, "COORDD_ADDR_ONE_SESSION="+one.GRPCAddr)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		t.Fatalf("node --test test.js did not finish within %v:\n%s", nodeTestTimeout, out)
	case err != nil:
		t.Fatalf("node --test test.js against %s: %v\n%s", in.GRPCAddr, err, out)
	}
	summary := nodeSummary.FindAllString(string(out), -1)
	t.Logf("node --test test.js against %s in %v: %s", in.GRPCAddr, time.Since(start).Round(time.Millisecond), strings.Join(summary, ", "))
	if !slices.Contains(summary, "# fail 0") || slices.Contains(summary, "# pass 0") {
		t.Fatalf("node --test passed but its summary is not one of passed tests:\n%s", out)
	}
}

// nodeSummary matches the counts at the end of node's TAP output.
var nodeSummary = regexp.MustCompile(`(?m)^# (tests|pass|fail|cancelled|skipped|todo) \d+$`)

// lookTool returns the path of a program on PATH; when there is none it
// fails the test under CI and skips it elsewhere.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if redistest.CI() {
			t.Fatalf("%s is not on PATH, and CI requires it for the Node.js client test: %v", name, err)
		}
		t.Skipf("%s is not on PATH: %v", name, err)
	}
	return path
}

// npmCI installs clients/node's dependencies from its package-lock.json
// with npm ci, unless an install at least as new as the lock file is there.
func npmCI(t *testing.T) {
	t.Helper()
	lock, err := os.Stat(filepath.Join(nodeClientDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.Stat(filepath.Join(nodeClientDir, "node_modules", ".package-lock.json"))
	if err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	npm := lookTool(t, "npm")
	ctx, cancel := context.WithTimeout(t.Context(), npmCITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = nodeClientDir
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", nodeClientDir, err, out)
	}
	t.Logf("npm ci in %s: %v", nodeClientDir, time.Since(start).Round(time.Millisecond))
}
