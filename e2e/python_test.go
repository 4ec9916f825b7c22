package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/redistest"
)

// debianPython is the distribution's Python, with the distribution's
// python3-grpcio, python3-protobuf and python3-grpc-tools (scripts/test.sh
// installs them): the toolchain a user of Debian or Ubuntu has.
const debianPython = "/usr/bin/python3"

const pythonTestTimeout = 90 * time.Second

// TestPythonClient generates the Python stubs from api/proto3 with Debian's
// grpc_tools (protoc 3.x, which cannot read editions: the reason api/proto3
// exists) and runs clients/python/test_coordd.py, every service and the
// session helper, against a coordd on the memory store (and the helper's
// retries of OVERLOADED against one with limits.max_sessions 1). A machine without
// Debian's packages skips it; CI fails it.
func TestPythonClient(t *testing.T) {
	if out, err := exec.Command(debianPython, "-c", "import grpc, grpc_tools, google.protobuf; print(grpc.__version__, google.protobuf.__version__)").CombinedOutput(); err != nil {
		msg := "Debian's python3-grpcio, python3-protobuf and python3-grpc-tools are not installed (scripts/debian-packages.sh installs them): " + strings.TrimSpace(string(out))
		if redistest.CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	} else {
		t.Logf("%s: grpcio, protobuf %s", debianPython, strings.TrimSpace(string(out)))
	}
	gen := t.TempDir()
	protos, err := filepath.Glob(filepath.Join("..", "api", "proto3", "coord", "v1", "*.proto"))
	if err != nil || len(protos) == 0 {
		t.Fatalf("no api/proto3 files: %v", err)
	}
	// grpc_tools' own include directory has google/protobuf/*.proto.
	inc, err := exec.Command(debianPython, "-c", "import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'))").Output()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-m", "grpc_tools.protoc", "-I", filepath.Join("..", "api", "proto3"), "-I", strings.TrimSpace(string(inc)),
		"--python_out=" + gen, "--grpc_python_out=" + gen}, protos...)
	if out, err := exec.Command(debianPython, args...).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m grpc_tools.protoc on api/proto3: %v\n%s", err, out)
	}

	in := startMemoryInstance(t, "memory")
	one := startCoordd(t, "one-session", []string{"--store", "memory"}, "COORDD_LIMITS_MAX_SESSIONS=1")
	ctx, cancel := context.WithTimeout(t.Context(), pythonTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, debianPython, "-m", "unittest", "-v", "test_coordd")
	cmd.Dir = filepath.Join("..", "clients", "python")
	cmd.Env = append(environWithout("COORDD_"), "COORDD_ADDR="+in.GRPCAddr, "COORDD_ADDR_ONE_SESSION="+one.GRPCAddr, "PYTHONPATH="+gen, "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		t.Fatalf("python3 -m unittest did not finish within %v:\n%s", pythonTestTimeout, out)
	case err != nil:
		t.Fatalf("python3 -m unittest test_coordd against %s: %v\n%s", in.GRPCAddr, err, out)
	}
	ran := pythonRan.FindString(string(out))
	t.Logf("python3 -m unittest test_coordd against %s in %v: %s", in.GRPCAddr, time.Since(start).Round(time.Millisecond), ran)
	if ran == "" || ran == "Ran 0 tests" || !strings.Contains(string(out), "\nOK") || strings.Contains(string(out), "skipped") {
		t.Fatalf("python3 -m unittest passed but did not report tests that passed, or skipped some:\n%s", out)
	}
}

var pythonRan = regexp.MustCompile(`Ran \d+ tests?`)
