package deploy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// runBuild runs the coordd container of a build's Deployment as the
// kubelet would: with the build's coordd.yaml, the files of the Secrets it
// mounts (a self-signed certificate for tls.*, a list of API keys for a
// .yaml), its command and its environment. It checks that coordd serves
// and exports want, and that the Go runtime took GOMEMLIMIT.
func runBuild(t *testing.T, bin string, objs []object, want []string) {
	t.Helper()
	dep := one(t, objs, "Deployment")
	c := container(t, dep, "coordd")
	cfg := getString(coorddConfigMap(t, objs, dep), "data", filepath.Base(coorddConfigPath))
	dir := t.TempDir()
	path := filepath.Join(dir, "coordd.yaml")
	paths := map[string]string{coorddConfigPath: path}
	for _, m := range getList(c, "volumeMounts") {
		mount := getString(m, "mountPath")
		if mount == filepath.Dir(coorddConfigPath) {
			continue
		}
		v := podVolume(dep, getString(m, "name"))
		local := filepath.Join(dir, getString(m, "name"))
		if err := os.Mkdir(local, 0o700); err != nil {
			t.Fatal(err)
		}
		paths[strings.TrimSuffix(mount, "/")+"/"] = local + "/"
		for _, item := range getList(v, "secret", "items") {
			f := getString(item, "path")
			if err := os.WriteFile(filepath.Join(local, f), secretFile(t, f), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	local := func(s string) string {
		for from, to := range paths {
			s = strings.ReplaceAll(s, from, to)
		}
		return s
	}
	if err := os.WriteFile(path, []byte(local(cfg)), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range append(strs(get(c, "command")), strs(get(c, "args"))...)[1:] {
		args = append(args, local(a))
	}
	env, _ := containerEnv(t, c)
	for k := range env {
		if strings.HasPrefix(k, "OTEL_EXPORTER_OTLP_") {
			// No collector here, and coordd, on SIGTERM, tries to flush its
			// spans to an unreachable one for as long as shutdown_timeout.
			delete(env, k)
		}
	}
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

// secretFile is what the test puts in a mounted Secret's file, by its
// name: a certificate, its key, or a list of API keys.
func secretFile(t *testing.T, name string) []byte {
	t.Helper()
	cert, key := testCertificate(t)
	switch {
	case name == "tls.crt" || name == "ca.crt":
		return cert
	case name == "tls.key":
		return key
	case strings.HasSuffix(name, ".yaml"):
		sum := sha256.Sum256([]byte("a key of the deploy tests"))
		return []byte("- namespace: search\n  key_sha256: " + hex.EncodeToString(sum[:]) + "\n")
	}
	t.Fatalf("a Secret's file %s, which the test cannot fill", name)
	return nil
}

var testCert struct {
	once      sync.Once
	cert, key []byte
	err       error
}

// testCertificate is a self-signed certificate (its own CA) for localhost,
// and its key, in PEM.
func testCertificate(t *testing.T) (cert, key []byte) {
	t.Helper()
	testCert.once.Do(func() {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			testCert.err = err
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "coordd"},
			DNSNames:              []string{"localhost"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(24 * time.Hour),
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			testCert.err = err
			return
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			testCert.err = err
			return
		}
		testCert.cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		testCert.key = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	})
	if testCert.err != nil {
		t.Fatal(testCert.err)
	}
	return testCert.cert, testCert.key
}

// TestCoorddRunsTheseConfigs: coordd starts with the configuration each
// deployment gives it (every key known, every value valid): the kustomize
// overlays, the Helm chart's renders, the compose services. It answers the
// image's health check and exports the metrics the dashboard shows.
func TestCoorddRunsTheseConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs coordd")
	}
	bin := buildCoordd(t)
	onRedis := append(slices.Clip(exportedAtStart), "coordd_store_breaker_open")

	t.Run("sidecar", func(t *testing.T) { runBuild(t, bin, build(t, sidecarDir), exportedAtStart) })
	t.Run("shared", func(t *testing.T) { runBuild(t, bin, build(t, sharedDir), onRedis) })
	for _, hc := range helmCases {
		t.Run("helm/"+hc.name, func(t *testing.T) {
			objs := hc.render(t)
			want := exportedAtStart
			if getString(coorddConfig(t, objs, one(t, objs, "Deployment")), "store") == "redis" {
				want = onRedis
			}
			runBuild(t, bin, objs, want)
		})
	}
	for n, s := range composeServices(t) {
		if s["build"] == nil {
			continue
		}
		t.Run("compose/"+n, func(t *testing.T) {
			addr := startCoordd(t, bin, strs(s["command"]), environment(s))
			checkServing(t, bin, addr, onRedis)
		})
	}
	t.Run("coordd-redis-cluster.yaml", func(t *testing.T) {
		addr := startCoordd(t, bin, []string{"--config=coordd-redis-cluster.yaml"}, nil)
		checkServing(t, bin, addr, nil)
	})
}
