package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/daemontest"
)

// secretVolume is a directory laid out as the kubelet lays out a Secret
// volume: each file a symlink through "..data" to a timestamped directory,
// all replaced at once by renaming a new "..data" symlink over the old.
type secretVolume struct {
	t    *testing.T
	dir  string
	prev string // the timestamped directory ..data points to
}

func (v *secretVolume) update(files map[string][]byte) {
	t := v.t
	t.Helper()
	ts := fmt.Sprintf("..%s", time.Now().Format("2006_01_02_15_04_05.000000000"))
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(v.dir, ts, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(v.dir, name)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if v.prev != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, v.prev)); err != nil {
			t.Fatal(err)
		}
	}
	v.prev = ts
}

// TestBinaryReloadsChangedFiles: without a signal, coordd reloads its TLS
// files when their Secret volume swaps its ..data link, and its
// api_keys_file when it is written in place: new connections get the new
// certificate, the new key is accepted and the old one refused on the
// connection opened before. A broken keys file keeps the running keys and
// is logged at error without its text.
func TestBinaryReloadsChangedFiles(t *testing.T) {
	const (
		oldKey    = "old-key-of-team-0123456789"
		newKey    = "new-key-of-team-0123456789"
		brokenKey = "broken-key-of-team-0123456789"
	)
	ca := newTestCA(t, "coordd test CA")
	srv1, srv2 := ca.issue(t, "coordd", true, ""), ca.issue(t, "coordd", true, "")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	dir := t.TempDir()
	vol := &secretVolume{t: t, dir: filepath.Join(dir, "tls")}
	if err := os.Mkdir(vol.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	vol.update(map[string][]byte{"tls.crt": srv1.certPEM, "tls.key": srv1.keyPEM})
	keysDir := filepath.Join(dir, "keys")
	if err := os.Mkdir(keysDir, 0o755); err != nil {
		t.Fatal(err)
	}
	keysPath := filepath.Join(keysDir, "keys.yaml")
	writeKeys := func(content string) { // in place, as an editor or a bind mount would
		t.Helper()
		if err := os.WriteFile(keysPath, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKeys("- namespace: team\n  key: " + oldKey + "\n")
	config := filepath.Join(dir, "coordd.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("tls:\n  cert_file: %s\n  key_file: %s\nauth:\n  enabled: true\n  api_keys_file: %s\n",
		filepath.Join(vol.dir, "tls.crt"), filepath.Join(vol.dir, "tls.key"), keysPath)), 0o600); err != nil {
		t.Fatal(err)
	}

	p := startBinary(t, false, "--config", config)
	conn := tlsDial(t, p.GRPCAddr, roots, nil)
	defer conn.Close()
	waitServing(t, conn, 10*time.Second, p.Exited())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	locks := coordv1.NewLockServiceClient(conn)
	getLock := func(key string) error {
		_, err := locks.GetLock(bearerCtx(ctx, key), &coordv1.GetLockRequest{Name: "x"})
		return err
	}
	if got := servedSerial(t, p.GRPCAddr, roots, srv1.tls); got.Cmp(srv1.serial) != 0 {
		t.Fatalf("serial %v, want %v", got, srv1.serial)
	}
	if err := getLock(oldKey); err != nil {
		t.Fatalf("the old key before the change: %v", err)
	}
	wantCode(t, "the new key before the change", getLock(newKey), codes.Unauthenticated, "UNAUTHENTICATED")

	eventually := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 10s, and no signal was sent\n%s", what, p.Output())
			}
		}
	}
	// The certificate: a Secret volume's swap.
	vol.update(map[string][]byte{"tls.crt": srv2.certPEM, "tls.key": srv2.keyPEM})
	eventually("a new connection gets the new certificate", func() bool {
		return servedSerial(t, p.GRPCAddr, roots, srv1.tls).Cmp(srv2.serial) == 0
	})
	if err := getLock(oldKey); err != nil {
		t.Fatalf("the old key after a certificate change: %v", err)
	}

	// The keys: a file written in place.
	writeKeys("- namespace: team\n  key: " + newKey + "\n")
	eventually("the new key accepted", func() bool { return getLock(newKey) == nil })
	wantCode(t, "the old key after the change", getLock(oldKey), codes.Unauthenticated, "UNAUTHENTICATED")
	if !strings.Contains(p.Output(), "file changed") {
		t.Errorf("no reload logged as started by a file change:\n%s", p.Output())
	}

	// A broken file: logged, the running keys stay.
	writeKeys("- " + brokenKey + "\n")
	p.WaitLog(t, "reload failed", 1, 10*time.Second)
	if err := getLock(newKey); err != nil {
		t.Errorf("the running key after a failed reload: %v", err)
	}
	if strings.Contains(p.Output(), brokenKey[:6]) {
		t.Errorf("the log quotes the keys file's text:\n%s", p.Output())
	}
	p.Stop(t)
}

// TestFileWatchTouched: which events count as a change of which watched
// files.
func TestFileWatchTouched(t *testing.T) {
	fw := &fileWatch{
		files: map[string]bool{"/s/tls.crt": true, "/s/tls.key": true, "/k/keys.yaml": true, "/e/": true},
		dirs:  map[string]bool{"/s": true, "/k": true, "/e": true},
	}
	for _, c := range []struct {
		ev   fsnotify.Event
		want []string
	}{
		{fsnotify.Event{Name: "/k/keys.yaml", Op: fsnotify.Write}, []string{"/k/keys.yaml"}},
		{fsnotify.Event{Name: "/k/keys.yaml", Op: fsnotify.Create}, []string{"/k/keys.yaml"}}, // renamed over
		{fsnotify.Event{Name: "/k/keys.yaml", Op: fsnotify.Remove}, []string{"/k/keys.yaml"}},
		{fsnotify.Event{Name: "/k/keys.yaml", Op: fsnotify.Chmod}, nil},
		{fsnotify.Event{Name: "/k/other.yaml", Op: fsnotify.Write}, nil},
		{fsnotify.Event{Name: "/k/keys.yaml.tmp", Op: fsnotify.Create}, nil},
		{fsnotify.Event{Name: "/s/..data", Op: fsnotify.Create}, []string{"/s/tls.crt", "/s/tls.key"}},
		{fsnotify.Event{Name: "/s/..2026_12_03_07_52_21.679363474", Op: fsnotify.Remove}, []string{"/s/tls.crt", "/s/tls.key"}},
		{fsnotify.Event{Name: "/elsewhere/..data", Op: fsnotify.Create}, nil},
		// Any file of a watched directory (ratelimit.envoy_config).
		{fsnotify.Event{Name: "/e/web.yaml", Op: fsnotify.Write}, []string{"/e/web.yaml"}},
		{fsnotify.Event{Name: "/e/new.yml", Op: fsnotify.Create}, []string{"/e/new.yml"}},
		{fsnotify.Event{Name: "/e/..data", Op: fsnotify.Create}, []string{"/e/..data"}},
		{fsnotify.Event{Name: "/e/web.yaml", Op: fsnotify.Chmod}, nil},
		{fsnotify.Event{Name: "/e/sub/api.yaml", Op: fsnotify.Write}, []string{"/e/sub/api.yaml"}},
		{fsnotify.Event{Name: "/e", Op: fsnotify.Create}, []string{"/e"}}, // the directory replaced
		{fsnotify.Event{Name: "/elsewhere.yaml", Op: fsnotify.Write}, nil},
	} {
		got := fw.touched(c.ev)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("touched(%v) = %v, want %v", c.ev, got, c.want)
		}
	}
}

// TestBinaryEnvoyConfig: ratelimit.envoy_config with a bad file refuses to
// start, naming the file and line; a good one serves ShouldRateLimit; a
// changed file in the directory is reloaded without a signal, a new file
// too, and a subdirectory's, and the directory replaced by a rename; a
// broken one keeps the running configuration and logs its file and line;
// SIGHUP reloads coordd.yaml's new directory.
func TestBinaryEnvoyConfig(t *testing.T) {
	dir := t.TempDir()
	envoyDir := filepath.Join(dir, "envoy")
	if err := os.Mkdir(envoyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(envoyDir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	limit := func(domain string, n int) string {
		return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", domain, n)
	}
	write("web.yaml", "domain: web\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	config := filepath.Join(dir, "coordd.yaml")
	if err := os.WriteFile(config, []byte("ratelimit:\n  envoy_config: "+envoyDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(daemontest.Binary(t), "--config", config, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "web.yaml:4") || !strings.Contains(string(out), "fortnight") {
		t.Fatalf("coordd with an unknown unit: %v; want a refusal naming web.yaml:4 and the unit:\n%s", err, out)
	}

	write("web.yaml", limit("web", 1))
	p := startBinary(t, false, "--config", config)
	conn := dial(t, p.GRPCAddr)
	defer conn.Close()
	waitServing(t, conn, 10*time.Second, p.Exited())
	cl := rlsv3.NewRateLimitServiceClient(conn)
	seq := 0
	limitOf := func(domain string) uint32 { // of a fresh value's descriptor
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		seq++
		r, err := cl.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*commonrl.RateLimitDescriptor{{
			Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: "k", Value: fmt.Sprint(seq)}}}}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 10s\n%s", what, p.Output())
			}
		}
	}
	if n := limitOf("web"); n != 1 {
		t.Fatalf("limit %d at the start, want 1", n)
	}
	write("web.yaml", limit("web", 2))
	eventually("a changed file reloaded", func() bool { return limitOf("web") == 2 })
	write("api.yml", limit("api", 7))
	eventually("a new file loaded", func() bool { return limitOf("api") == 7 })

	write("web.yaml", "domain: web\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 3}\n  - key: k\n")
	p.WaitLog(t, "web.yaml:5", 1, 10*time.Second)
	if n := limitOf("web"); n != 2 {
		t.Errorf("limit %d after a broken file, want the running 2", n)
	}
	if !strings.Contains(p.Output(), "reload failed") {
		t.Errorf("the broken file's reload is not logged as failed:\n%s", p.Output())
	}

	// A subdirectory's file (a load reads them too).
	if err := os.Mkdir(filepath.Join(envoyDir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("web.yaml", limit("web", 2))
	write("sub/more.yaml", limit("more", 5))
	eventually("a new subdirectory's file loaded", func() bool { return limitOf("more") == 5 })
	write("sub/more.yaml", limit("more", 6))
	eventually("a subdirectory's changed file reloaded", func() bool { return limitOf("more") == 6 })

	// The directory replaced at once (a rename over it), then changed:
	// both seen without a signal.
	next := filepath.Join(dir, "envoy.next")
	if err := os.Mkdir(next, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(next, "web.yaml"), []byte(limit("web", 8)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(envoyDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, envoyDir); err != nil {
		t.Fatal(err)
	}
	eventually("a replaced directory loaded", func() bool { return limitOf("web") == 8 })
	write("web.yaml", limit("web", 9))
	eventually("a change in the replaced directory reloaded", func() bool { return limitOf("web") == 9 })

	// SIGHUP: coordd.yaml, which is not watched, now names another
	// directory.
	other := filepath.Join(dir, "envoy2")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "web.yaml"), []byte(limit("web", 4)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte("ratelimit:\n  envoy_config: "+other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // no reload without the signal
	if n := limitOf("web"); n != 9 {
		t.Fatalf("limit %d after coordd.yaml changed without SIGHUP, want 9", n)
	}
	p.Signal(t, syscall.SIGHUP)
	eventually("SIGHUP reloaded coordd.yaml's new directory", func() bool { return limitOf("web") == 4 })
	p.Stop(t)
}
