package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildCoordd builds ../cmd/coordd into a temporary directory.
func buildCoordd(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build coordd with")
	}
	bin := filepath.Join(t.TempDir(), "coordd")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/coordd")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/coordd: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is this process's environment without COORDD_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORDD_") {
			env = append(env, kv)
		}
	}
	return env
}

// startCoordd runs coordd with args and env as a deployment would, but on
// loopback ports of its own and with any Redis address replaced by a closed
// loopback port (coordd starts without Redis, calls fail UNAVAILABLE). It
// waits until coordd serves and returns its HTTP address; the process is
// stopped with SIGTERM at the end of the test, which must end it with
// status 0.
func startCoordd(t *testing.T, bin string, args []string, env map[string]string) string {
	t.Helper()
	environ := cleanEnv()
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	environ = append(environ, "COORDD_REDIS_ADDRS=127.0.0.1:1", "COORDD_LOG_FORMAT=json")
	// Flags override the file and the environment; the last of a repeated
	// flag wins.
	args = append(args, "--grpc-addr=127.0.0.1:0", "--http-addr=127.0.0.1:0")
	cmd := exec.Command(bin, args...)
	cmd.Env = environ
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	serving := make(chan string, 1)
	exited := make(chan struct{}) // closed when the process has ended
	var waitErr error
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			var line struct{ Msg, HTTP string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "coordd serving" {
				serving <- line.HTTP
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
			return // reported already
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("coordd %v: after SIGTERM: %v\n%s", args, waitErr, log.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("coordd %v: still running 30s after SIGTERM\n%s", args, log.String())
		}
	})
	select {
	case addr := <-serving:
		return addr
	case <-exited:
		t.Fatalf("coordd %v exited before serving: %v\n%s", args, waitErr, log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("coordd %v: not serving after 30s", args)
	}
	return ""
}

// checkServing runs the image's health check command against coordd and
// reads its metrics, which must include want.
func checkServing(t *testing.T, bin, httpAddr string, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := exec.CommandContext(ctx, bin, "healthcheck", "--http-addr="+httpAddr)
	hc.Env = cleanEnv()
	if out, err := hc.CombinedOutput(); err != nil {
		t.Errorf("coordd healthcheck: %v\n%s", err, out)
	}
	body := metrics(t, httpAddr)
	for _, m := range want {
		if !strings.Contains(body, "\n"+m) {
			t.Errorf("/metrics has no %s", m)
		}
	}
}

// metrics reads coordd's /metrics.
func metrics(t *testing.T, httpAddr string) string {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// exportedAtStart are the series of metricNames that coordd exports before
// any call: all but those labelled by a store operation, a queue or an
// inline limit, which appear once used.
var exportedAtStart = []string{
	"grpc_server_handled_total", "grpc_server_handling_seconds_bucket",
	"coordd_grpc_wait_seconds_bucket", "coordd_holds_lost_total", "coordd_idempotency_outcomes_total",
	"coordd_holds_granted_total", "coordd_holds_contended_total", "coordd_hold_duration_seconds_count", "coordd_holds_expired_total",
	"coordd_hold_wait_seconds_bucket", "coordd_hold_duration_seconds_bucket", "coordd_session_streams",
}

// TestCoorddRunsTheseConfigs: coordd starts with the configuration each
// deployment gives it (every key known, every value valid), answers the
// image's health check and exports the metrics the dashboard shows.
func TestCoorddRunsTheseConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs coordd")
	}
	bin := buildCoordd(t)

	overlay := func(t *testing.T, dir string, want []string) {
		objs := build(t, dir)
		dep := one(t, objs, "Deployment")
		c := container(t, dep, "coordd")
		var cfg string
		for _, cm := range ofKind(objs, "ConfigMap") {
			if strings.HasPrefix(name(cm), "coordd-config") {
				cfg = getString(cm, "data", "coordd.yaml")
			}
		}
		path := filepath.Join(t.TempDir(), "coordd.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, a := range append(strs(get(c, "command")), strs(get(c, "args"))...)[1:] {
			args = append(args, strings.Replace(a, "/etc/coordd/coordd.yaml", path, 1))
		}
		env, _ := containerEnv(t, c)
		addr := startCoordd(t, bin, args, env)
		checkServing(t, bin, addr, want)
		if v := env["GOMEMLIMIT"]; v != "" {
			// The Go runtime took it (it refuses to start on a malformed one).
			limit, _ := goMemLimit(v)
			if m := fmt.Sprintf("\ngo_gc_gomemlimit_bytes %g\n", float64(limit)); !strings.Contains(metrics(t, addr), m) {
				t.Errorf("/metrics has no %q", m[1:])
			}
		}
	}
	t.Run("sidecar", func(t *testing.T) { overlay(t, sidecarDir, exportedAtStart) })
	t.Run("shared", func(t *testing.T) {
		overlay(t, sharedDir, append(exportedAtStart, "coordd_store_breaker_open"))
	})
	for n, s := range composeServices(t) {
		if s["build"] == nil {
			continue
		}
		t.Run("compose/"+n, func(t *testing.T) {
			addr := startCoordd(t, bin, strs(s["command"]), environment(s))
			checkServing(t, bin, addr, append(exportedAtStart, "coordd_store_breaker_open"))
		})
	}
	t.Run("coordd-redis-cluster.yaml", func(t *testing.T) {
		addr := startCoordd(t, bin, []string{"--config=coordd-redis-cluster.yaml"}, nil)
		checkServing(t, bin, addr, nil)
	})
}
