package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// NodeTimeout is the cluster-node-timeout of the clusters StartCluster
// starts: how long a node may be unreachable before the others count it
// as failing.
const NodeTimeout = 2 * time.Second

// Server is one redis-server process that this package started: a
// standalone server from StartStandalone or a node of a ClusterProc. Its
// methods fail the test on error and must be called from the test's
// goroutine.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	env  []string // added to the process's environment (StartStandaloneEnv)

	mu   sync.Mutex
	proc *process // nil while not running
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
}

// StartStandalone starts a private standalone redis-server on a free
// loopback port and registers its end with t.Cleanup. When redis-server is
// not installed the test fails under CI and is skipped otherwise.
func StartStandalone(t testing.TB) *Server {
	t.Helper()
	return StartStandaloneEnv(t)
}

// StartStandaloneEnv is StartStandalone with env ("NAME=value") added to
// the server's environment, every time it starts: e.g. an LD_PRELOAD that
// shifts its clock.
func StartStandaloneEnv(t testing.TB, env ...string) *Server {
	t.Helper()
	bin, _ := binaries(t)
	s, err := startServer(t, bin, t.TempDir(), nil, env)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { s.cleanup() })
	return s
}

// Addr returns the server's address, 127.0.0.1:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Running reports whether the process is running (it was started and has
// not exited).
func (s *Server) Running() bool {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill ends the process with SIGKILL, as a crash would, and waits until it
// has exited. Killing a server that is not running does nothing.
func (s *Server) Kill() {
	s.t.Helper()
	if err := s.kill(); err != nil {
		s.t.Fatalf("redistest: kill %s: %v", s.Addr(), err)
	}
}

func (s *Server) kill() error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("still running 10s after SIGKILL")
	}
}

// Stop shuts the server down with SHUTDOWN NOSAVE and waits until it has
// exited. Stopping a server that is not running does nothing.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.stop(); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

func (s *Server) stop() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	// The reply is an EOF when the server goes away, as it should; an
	// error reply means it refused, which the wait below reports.
	_, shutdownErr := do(s.Addr(), "SHUTDOWN", "NOSAVE")
	select {
	case <-p.done:
		s.mu.Lock()
		s.proc = nil
		s.mu.Unlock()
		return nil
	case <-time.After(15 * time.Second):
		_ = s.kill()
		return fmt.Errorf("%s did not exit within 15s of SHUTDOWN NOSAVE (reply: %v); killed it", s.Addr(), shutdownErr)
	}
}

// Start starts the server again with the same port and configuration, and
// waits until it answers PING. Without persistence it has no data; a
// cluster node keeps its nodes.conf (see the package documentation for
// what it then becomes). Starting a running server fails the test.
func (s *Server) Start() {
	s.t.Helper()
	if s.Running() {
		s.t.Fatalf("redistest: Start %s: already running", s.Addr())
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

func (s *Server) confPath() string { return filepath.Join(s.dir, "redis.conf") }
func (s *Server) logPath() string  { return filepath.Join(s.dir, "redis.log") }

// startServer writes a configuration for a new server on a free port in a
// directory of its own under parent and starts it. cluster, when not nil,
// adds the cluster settings with the bus port it is given. A port that
// another process takes between its choice and redis-server's bind is
// retried with other ports.
func startServer(t testing.TB, bin, parent string, cluster func(busPort int) []string, env []string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp(parent, "redis-")
		if err != nil {
			return nil, err
		}
		s := &Server{t: t, bin: bin, dir: dir, port: ports[0], env: env}
		conf := []string{
			"bind 127.0.0.1",
			"port " + strconv.Itoa(s.port),
			"daemonize no",
			"dir " + quote(dir),
			"logfile " + quote(s.logPath()),
			`save ""`,
			"appendonly no",
			"repl-diskless-sync-delay 0",
		}
		if cluster != nil {
			conf = append(conf, cluster(ports[1])...)
		}
		if err := os.WriteFile(s.confPath(), []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
			return nil, err
		}
		err = s.start()
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "in use") {
			break
		}
	}
	return nil, lastErr
}

// start runs redis-server with the server's configuration and waits until
// it answers PING.
func (s *Server) start() error {
	stderr, err := os.OpenFile(filepath.Join(s.dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stderr.Close()
	cmd := exec.Command(s.bin, s.confPath())
	cmd.Dir = s.dir
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	// Files, not pipes: no goroutine copies output, and a process that
	// redis-server forks cannot keep Wait from returning.
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server on port %d: %w", s.port, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.done:
			s.mu.Lock()
			s.proc = nil
			s.mu.Unlock()
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, s.logTail(10))
		default:
		}
		// Dial first: go-redis logs every failed dial.
		if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
			_ = conn.Close()
			if ping(s.Addr()) == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			_ = s.kill()
			return fmt.Errorf("redis-server on port %d does not answer PING after 10s: %s", s.port, s.logTail(10))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanup kills the server at the end of the test, first logging the end
// of its log if the test failed.
func (s *Server) cleanup() {
	if s.t.Failed() {
		s.t.Logf("redistest: %s log:\n%s", s.Addr(), s.logTail(20))
	}
	if err := s.kill(); err != nil {
		s.t.Errorf("redistest: kill %s: %v", s.Addr(), err)
	}
}

// logTail returns the last n lines of the server's log and stderr.
func (s *Server) logTail(n int) string {
	var out []byte
	for _, name := range []string{"stderr.log", "redis.log"} {
		b, _ := os.ReadFile(filepath.Join(s.dir, name))
		out = append(out, b...)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// DeadAddr returns a loopback address where nothing listens: a port that
// was free a moment ago and that this package never hands out again. A
// test lists it for a server it cannot reach (the far side of a
// partition): a dial is refused at once.
func DeadAddr(t testing.TB) string {
	t.Helper()
	ports, err := freePorts(1)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
}

// quote quotes a path for redis.conf.
func quote(path string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(path) + `"`
}

var (
	portsMu sync.Mutex
	given   = map[int]bool{} // ports handed out in this process, never twice
)

// freePorts returns n distinct loopback ports that were free a moment ago
// and that this process has not handed out before.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100 {
			return nil, errors.New("no free loopback ports")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		p := l.Addr().(*net.TCPAddr).Port
		if !given[p] {
			given[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}
