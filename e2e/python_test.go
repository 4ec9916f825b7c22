package e2e

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/redistest"
)

// debianPython is the distribution's Python, with the distribution's
// python3-grpcio, python3-protobuf, python3-setuptools, python3-wheel and
// python3-venv (scripts/test.sh installs them): the toolchain a user of
// Debian or Ubuntu has. Not the python3 first on PATH, which may be
// another (pyenv's) that cannot see Debian's packages.
const debianPython = "/usr/bin/python3"

const (
	pythonInstallTimeout = 3 * time.Minute  // the venv and pip install, on a loaded machine
	pythonTestTimeout    = 90 * time.Second // python3 -m unittest test_coordd
	pythonExampleTimeout = 30 * time.Second // the README's example
)

// pythonClientDir is the Python package, relative to this package.
var pythonClientDir = filepath.Join("..", "clients", "python")

// TestPythonClient installs clients/python as a user of Debian would,
// offline: a fresh virtual environment with the system's site packages
// (Debian's grpcio and protobuf), then
//
//	pip install --no-build-isolation --no-index ./clients/python
//
// and, against a coordd on the memory store and one on the Redis Cluster
// (each with a second coordd at limits.max_sessions 1 for the Session's
// retries of OVERLOADED), runs the README's Python example (a session, a
// lock with its fence, an Allow) and clients/python/tests/test_coordd.py:
// every service through the package's stubs, the Session helper, and the
// package's typed API (Session.lock, Limiter, idempotent, Worker), all
// imported from the installed package. A machine without Debian's
// packages skips it; CI fails it.
func TestPythonClient(t *testing.T) {
	py := installPython(t)
	example := readmePythonExample(t)
	for _, backend := range []string{"memory", "cluster"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var in, one *instance
			switch backend {
			case "memory":
				in = startMemoryInstance(t, "memory")
				one = startCoordd(t, "one-session", []string{"--store", "memory"}, "COORDD_LIMITS_MAX_SESSIONS=1")
			case "cluster":
				addrs := redistest.Cluster(t)
				prefix := "e2e-py-" + randomHex(t, 8)
				in = startInstance(t, "cluster", addrs, prefix)
				one = startCoordd(t, "cluster-one-session", []string{"--store", "redis"},
					"COORDD_REDIS_ADDRS="+strings.Join(addrs, ","), "COORDD_REDIS_MODE=cluster",
					"COORDD_REDIS_KEY_PREFIX="+prefix+"-one", "COORDD_LIMITS_MAX_SESSIONS=1")
			}
			runPythonExample(t, py, example, in)
			runPythonUnittest(t, py, in, one)
		})
	}
}

// installPython creates a virtual environment with Debian's Python and its
// site packages in a temporary directory, installs clients/python into it
// with pip, offline, and returns the environment's python.
func installPython(t *testing.T) string {
	t.Helper()
	check := "import grpc, google.protobuf, setuptools, wheel, venv, ensurepip; print(grpc.__version__, google.protobuf.__version__, setuptools.__version__)"
	out, err := exec.Command(debianPython, "-c", check).CombinedOutput()
	if err != nil {
		msg := "Debian's python3-grpcio, python3-protobuf, python3-setuptools, python3-wheel and python3-venv are not installed (scripts/debian-packages.sh installs them): " + strings.TrimSpace(string(out))
		if redistest.CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Logf("%s: grpcio, protobuf, setuptools %s", debianPython, strings.TrimSpace(string(out)))

	// pip builds in the source folder (build/, coordd.egg-info/): build a
	// copy, so that the repository stays as it is.
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	copyPythonPackage(t, pythonClientDir, filepath.Join(src, "clients", "python"))
	venv := filepath.Join(dir, "venv")
	ctx, cancel := context.WithTimeout(t.Context(), pythonInstallTimeout)
	defer cancel()
	start := time.Now()
	runPython(ctx, t, "", debianPython, "-m", "venv", "--system-site-packages", venv)
	pip := filepath.Join(venv, "bin", "pip")
	out = runPython(ctx, t, src, pip, "install", "--no-build-isolation", "--no-index", "./clients/python")
	if !strings.Contains(string(out), "Successfully installed coordd-") {
		t.Fatalf("pip install did not say it installed coordd:\n%s", out)
	}
	py := filepath.Join(venv, "bin", "python")
	where := strings.Fields(string(runPython(ctx, t, dir, py, "-c",
		"import coordd, grpc, google.protobuf; print(coordd.__file__, grpc.__file__, google.protobuf.__file__)")))
	if len(where) != 3 || !strings.HasPrefix(where[0], venv+string(filepath.Separator)) ||
		!strings.HasPrefix(where[1], "/usr/lib/python3/") || !strings.HasPrefix(where[2], "/usr/lib/python3/") {
		t.Fatalf("want coordd from %s and grpc, protobuf from Debian's /usr/lib/python3; python imports %q", venv, where)
	}
	t.Logf("python3 -m venv --system-site-packages and pip install --no-build-isolation --no-index ./clients/python in %v: coordd at %s", time.Since(start).Round(time.Millisecond), where[0])
	return py
}

// copyPythonPackage copies the package's sources from src to dst, less
// what building or running it leaves behind.
func copyPythonPackage(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if name == "build" || name == "dist" || name == "__pycache__" || strings.HasSuffix(name, ".egg-info") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pythonEnviron is the environment of the Python processes: the test's,
// less coordd's, Python's and pip's variables (a PYTHONPATH could hide
// the installed package, a pip configuration could reach an index), with
// pip's configuration files left unread.
func pythonEnviron(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORDD_") && !strings.HasPrefix(kv, "PYTHON") && !strings.HasPrefix(kv, "PIP_") && !strings.HasPrefix(kv, "VIRTUAL_ENV=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PIP_CONFIG_FILE="+os.DevNull, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1")
	return append(env, extra...)
}

// runPython runs a program in dir and returns its output; it fails the
// test if it fails.
func runPython(ctx context.Context, t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = pythonEnviron()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// readmePythonExample returns the README's Python example: its Python
// block that takes a lock and calls Allow.
func readmePythonExample(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range pythonBlock.FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(m[1], "session.lock(") && strings.Contains(m[1], ".allow(") {
			return m[1]
		}
	}
	t.Fatal("README.md has no ```python block that takes a lock (session.lock) and calls Allow (.allow)")
	return ""
}

var (
	pythonBlock   = regexp.MustCompile("(?s)\n```python\n(.*?)\n```\n")
	pythonFence   = regexp.MustCompile(`(?m)^fence (\d+)$`)
	pythonAllowed = regexp.MustCompile(`(?m)^allowed True remaining 4$`)
	pythonRan     = regexp.MustCompile(`Ran \d+ tests?`)
)

// runPythonExample runs the README's example against in: it must print
// the fence of a lock it took and an Allow that allowed.
func runPythonExample(t *testing.T, py, example string, in *instance) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "example.py")
	if err := os.WriteFile(script, []byte(example+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), pythonExampleTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = pythonEnviron("COORDD_ADDR=" + in.GRPCAddr)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's Python example against %s (%s): %v\n%s", in.Name, in.GRPCAddr, err, out)
	}
	m := pythonFence.FindStringSubmatch(string(out))
	if m == nil || !pythonAllowed.Match(out) {
		t.Fatalf("the README's Python example against %s printed no fence of its lock, or no Allow that allowed (with 4 remaining):\n%s", in.Name, out)
	}
	if fence, err := strconv.ParseUint(m[1], 10, 64); err != nil || fence == 0 {
		t.Fatalf("the README's Python example against %s printed fence %q", in.Name, m[1])
	}
	t.Logf("the README's Python example against %s: %s", in.Name, strings.Join(strings.Fields(string(out)), " "))
}

// runPythonUnittest runs clients/python/tests/test_coordd.py against in
// (and one, at limits.max_sessions 1), from its own folder: "import
// coordd" finds the installed package there (the test checks that too).
func runPythonUnittest(t *testing.T, py string, in, one *instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), pythonTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", "test_coordd")
	cmd.Dir = filepath.Join(pythonClientDir, "tests")
	cmd.Env = pythonEnviron("COORDD_ADDR="+in.GRPCAddr, "COORDD_ADDR_ONE_SESSION="+one.GRPCAddr)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		t.Fatalf("python -m unittest did not finish within %v:\n%s", pythonTestTimeout, out)
	case err != nil:
		t.Fatalf("python -m unittest test_coordd against %s (%s): %v\n%s", in.Name, in.GRPCAddr, err, out)
	}
	ran := pythonRan.FindString(string(out))
	t.Logf("python -m unittest test_coordd against %s in %v: %s", in.Name, time.Since(start).Round(time.Millisecond), ran)
	if ran == "" || ran == "Ran 0 tests" || !strings.Contains(string(out), "\nOK") || strings.Contains(string(out), "skipped") {
		t.Fatalf("python -m unittest passed but did not report tests that passed, or skipped some:\n%s", out)
	}
}
