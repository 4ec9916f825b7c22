package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// recorder is a LockService whose GetLock records what the client sent.
type recorder struct {
	coordv1.UnimplementedLockServiceServer
	mu       sync.Mutex
	auth     []string // the authorization metadata of the last call
	clientCN string   // the verified client certificate's CN, if any
}

func (r *recorder) GetLock(ctx context.Context, _ *coordv1.GetLockRequest) (*coordv1.GetLockResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.auth = md.Get("authorization")
	r.clientCN = ""
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
			r.clientCN = info.State.VerifiedChains[0][0].Subject.CommonName
		}
	}
	return &coordv1.GetLockResponse{}, nil
}

func (r *recorder) last() ([]string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.auth, r.clientCN
}

// serveRecorder serves a recorder on loopback until the end of the test.
func serveRecorder(t *testing.T, opts ...grpc.ServerOption) (*recorder, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	srv := grpc.NewServer(opts...)
	coordv1.RegisterLockServiceServer(srv, rec)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return rec, l.Addr().String()
}

func TestAPIKeyHeader(t *testing.T) {
	rec, addr := serveRecorder(t)
	c := ctl{t: t, addr: addr, dir: t.TempDir()}

	want(t, c.run("get-lock", "x"), 0, "not held", "")
	if auth, _ := rec.last(); len(auth) != 0 {
		t.Errorf("without a key, authorization = %q; want none", auth)
	}
	want(t, c.run("--api-key", "k-123", "get-lock", "x"), 0, "", "")
	if auth, _ := rec.last(); len(auth) != 1 || auth[0] != "Bearer k-123" {
		t.Errorf("with --api-key, authorization = %q; want [Bearer k-123]", auth)
	}
	c.env = []string{"COORDCTL_API_KEY=k-env"}
	want(t, c.run("get-lock", "x"), 0, "", "")
	if auth, _ := rec.last(); len(auth) != 1 || auth[0] != "Bearer k-env" {
		t.Errorf("with COORDCTL_API_KEY, authorization = %q; want [Bearer k-env]", auth)
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	serverCert := ca.issue(t, "coordd.test", false)
	clientCert := ca.issue(t, "ci-runner", true)
	caFile := writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.cert.Raw)
	certFile := writePEM(t, dir, "client.pem", "CERTIFICATE", clientCert.Certificate[0])
	keyDER, err := x509.MarshalPKCS8PrivateKey(clientCert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := writePEM(t, dir, "client-key.pem", "PRIVATE KEY", keyDER)

	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	rec, addr := serveRecorder(t, grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven,
	})))
	c := ctl{t: t, addr: addr, dir: dir}
	trust := []string{"--ca-file", caFile, "--server-name", "coordd.test"}

	want(t, c.run(append(trust, "--api-key", "k", "get-lock", "x")...), 0, "not held", "")
	if auth, cn := rec.last(); len(auth) != 1 || auth[0] != "Bearer k" || cn != "" {
		t.Errorf("TLS without a client certificate: authorization %q, client CN %q; want [Bearer k] and none", auth, cn)
	}
	want(t, c.run(append(trust, "--cert-file", certFile, "--key-file", keyFile, "get-lock", "x")...), 0, "not held", "")
	if _, cn := rec.last(); cn != "ci-runner" {
		t.Errorf("mTLS: the server verified client %q; want ci-runner", cn)
	}

	// Failures: no trust in the CA, the wrong name, plaintext to a TLS port.
	want(t, c.run("--tls", "--timeout", "2s", "get-lock", "x"), exitUnavailable, "", "UNAVAILABLE")
	want(t, c.run("--ca-file", caFile, "--server-name", "other.test", "--timeout", "2s", "get-lock", "x"), exitUnavailable, "", "UNAVAILABLE")
	want(t, c.run("--timeout", "2s", "get-lock", "x"), exitUnavailable, "", "UNAVAILABLE")
	// Unreadable files are reported before any call.
	want(t, c.run("--ca-file", filepath.Join(dir, "missing.pem"), "get-lock", "x"), exitFailure, "", "--ca-file")
}

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coordctl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

func (ca *testCA) issue(t *testing.T, name string, client bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
