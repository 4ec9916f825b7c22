package main

// TLS and mutual TLS of the gRPC port, with auth: client certificates
// mapped to namespaces, refused certificates, and certificate reload.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/server"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// nextSerial returns a random serial number, as a CA would.
func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n.Add(n, big.NewInt(1))
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issued is a leaf certificate with its key, in PEM and as a tls.Certificate.
type issued struct {
	certPEM, keyPEM []byte
	tls             tls.Certificate
	serial          *big.Int
}

// issue signs a leaf: a server certificate for 127.0.0.1 and localhost if
// server, else a client certificate with the URI SAN uri (if not "").
func (ca *testCA) issue(t *testing.T, cn string, server bool, uri string) issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		if uri != "" {
			u, err := url.Parse(uri)
			if err != nil {
				t.Fatal(err)
			}
			tmpl.URIs = []*url.URL{u}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := issued{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		serial:  tmpl.SerialNumber,
	}
	if out.tls, err = tls.X509KeyPair(out.certPEM, out.keyPEM); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	// Write and rename, as a secret volume or cert-manager would, so that a
	// reload never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// tlsDial opens a gRPC connection over TLS trusting ca, presenting client
// (if not nil).
func tlsDial(t *testing.T, addr string, roots *x509.CertPool, client *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	return tlsDialConfig(t, addr, cfg)
}

// presenting returns a client TLS configuration that presents cert whatever
// CAs the server asks for (Go's client otherwise sends no certificate when
// its issuer is not among them).
func presenting(roots *x509.CertPool, cert tls.Certificate) *tls.Config {
	return &tls.Config{
		RootCAs: roots, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
	}
}

func tlsDialConfig(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// servedSerial opens a bare TLS connection and returns the serial number
// of the certificate the server presents.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool, client tls.Certificate) *big.Int {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{
		RootCAs: roots, Certificates: []tls.Certificate{client}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatalf("tls.Dial %s: %v", addr, err)
	}
	defer c.Close()
	st := c.ConnectionState()
	if st.NegotiatedProtocol != "h2" {
		t.Errorf("negotiated %q, want h2", st.NegotiatedProtocol)
	}
	return st.PeerCertificates[0].SerialNumber
}

// peerSerial returns the serial of the server certificate of the
// connection a call went over.
func peerSerial(t *testing.T, p *peer.Peer) *big.Int {
	t.Helper()
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		t.Fatalf("the call's peer has auth info %T, want TLS", p.AuthInfo)
	}
	return ti.State.PeerCertificates[0].SerialNumber
}

func bearerCtx(c context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(c, "authorization", "Bearer "+key)
}

func wantCode(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
	if reason != "" {
		if got, domain := errorReason(err); got != reason || domain != "coordd" {
			t.Fatalf("%s: ErrorInfo %s/%s, want coordd/%s", what, domain, got, reason)
		}
	}
}

const (
	alphaURI = "spiffe://example.org/ns/alpha/sa/worker"
	betaKey  = "api-key-of-beta-0123456789"
)

// alphaBetaAuth is auth with alpha by certificate (alphaURI) and beta by
// API key (betaKey).
func alphaBetaAuth() AuthSection {
	return AuthSection{AuthConfig: server.AuthConfig{
		Enabled: true,
		APIKeys: []server.APIKey{{Namespace: "beta", Key: betaKey}},
		MTLS:    []server.Identity{{Identity: alphaURI, Namespace: "alpha"}},
	}}
}

// mtlsFiles are the PEM files of a daemon with mutual TLS.
type mtlsFiles struct{ dir, cert, key, ca, config string }

func (f mtlsFiles) yaml(mtls string) string {
	return fmt.Sprintf(`tls:
  cert_file: %s
  key_file: %s
  client_ca_file: %s
  client_auth: verify_if_given
auth:
  enabled: true
  api_keys:
    - namespace: beta
      key: %q
  mtls:
%s`, f.cert, f.key, f.ca, betaKey, mtls)
}

// TestMutualTLS runs a daemon with mutual TLS (verify_if_given) and auth:
// a mapped client certificate gives its namespace; an unmapped one is
// PERMISSION_DENIED; one of another CA and a plaintext client do not get
// past the handshake. Then the certificate files are replaced and
// reloaded: new connections get the new certificate, open ones go on.
func TestMutualTLS(t *testing.T) {
	e := startMutualTLS(t)
	ca, srv, mapped, unmapped, f, p, roots := e.ca, e.srv, e.mapped, e.unmapped, e.f, e.p, e.roots
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	alphaConn := tlsDial(t, p.grpcAddr, roots, &mapped.tls)
	defer alphaConn.Close()
	waitServing(t, alphaConn, 5*time.Second, nil)
	betaConn := tlsDial(t, p.grpcAddr, roots, nil) // server-side TLS only, API key
	defer betaConn.Close()
	alphaLocks := coordv1.NewLockServiceClient(alphaConn)
	betaLocks := coordv1.NewLockServiceClient(betaConn)

	var oldPeer peer.Peer
	t.Run("mapped certificate", func(t *testing.T) {
		g, err := alphaLocks.Lock(ctx, &coordv1.LockRequest{Name: "report", Ttl: durationpb.New(time.Minute), Owner: "alpha"}, grpc.Peer(&oldPeer))
		if err != nil || !g.GetAcquired() {
			t.Fatalf("Lock with the mapped certificate = %v, %v", g, err)
		}
		if got := peerSerial(t, &oldPeer); got.Cmp(srv.serial) != 0 {
			t.Errorf("served certificate serial %v, want %v", got, srv.serial)
		}
		info, err := alphaLocks.GetLock(ctx, &coordv1.GetLockRequest{Name: "report"})
		if err != nil || !info.GetHeld() || info.GetOwner() != "alpha" {
			t.Errorf("GetLock with the mapped certificate = %v, %v; want held by alpha", info, err)
		}
		// An API-key caller of another namespace does not see it.
		info, err = betaLocks.GetLock(bearerCtx(ctx, betaKey), &coordv1.GetLockRequest{Name: "report"})
		if err != nil || info.GetHeld() {
			t.Errorf("GetLock by beta's API key = %v, %v; want free (alpha's lock is in alpha)", info, err)
		}
		// A mapped certificate wins over a key: with beta's key, still alpha.
		info, err = alphaLocks.GetLock(bearerCtx(ctx, betaKey), &coordv1.GetLockRequest{Name: "report"})
		if err != nil || !info.GetHeld() {
			t.Errorf("GetLock with the mapped certificate and beta's key = %v, %v; want alpha's lock (the certificate wins)", info, err)
		}
	})

	t.Run("no certificate, no key", func(t *testing.T) {
		_, err := betaLocks.GetLock(ctx, &coordv1.GetLockRequest{Name: "report"})
		wantCode(t, "GetLock over TLS without certificate or key", err, codes.Unauthenticated, "UNAUTHENTICATED")
	})

	unmappedConn := tlsDial(t, p.grpcAddr, roots, &unmapped.tls)
	defer unmappedConn.Close()
	t.Run("unmapped certificate", func(t *testing.T) {
		_, err := coordv1.NewLockServiceClient(unmappedConn).GetLock(ctx, &coordv1.GetLockRequest{Name: "report"})
		wantCode(t, "GetLock with a valid but unmapped certificate", err, codes.PermissionDenied, "PERMISSION_DENIED")
		_, err = coordv1.NewLockServiceClient(unmappedConn).Lock(ctx, &coordv1.LockRequest{Name: "report2", Ttl: durationpb.New(time.Minute)})
		wantCode(t, "Lock with a valid but unmapped certificate", err, codes.PermissionDenied, "PERMISSION_DENIED")
		// With an API key as well (verify_if_given: certificate or key), the key decides.
		info, err := coordv1.NewLockServiceClient(unmappedConn).GetLock(bearerCtx(ctx, betaKey), &coordv1.GetLockRequest{Name: "report"})
		if err != nil || info.GetHeld() {
			t.Errorf("GetLock with an unmapped certificate and beta's key = %v, %v; want beta's (free) lock", info, err)
		}
	})

	t.Run("certificate of another CA", func(t *testing.T) { mtlsForeignCA(ctx, t, e) })

	t.Run("plaintext", func(t *testing.T) {
		conn := dial(t, p.grpcAddr)
		defer conn.Close()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := coordv1.NewLockServiceClient(conn).GetLock(bearerCtx(c, betaKey), &coordv1.GetLockRequest{Name: "report"})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("GetLock over plaintext to the TLS port = %v, want UNAVAILABLE", err)
		}
	})

	// An open KeepAlive stream, to survive the reload.
	stream, first := openKeepAlive(ctx, t, alphaConn)
	srv2 := mtlsReload(t, e)

	t.Run("after reload", func(t *testing.T) {
		mtlsAfterReload(ctx, t, e, srv2, alphaLocks, unmappedConn, stream, first.GetSessionId())
	})

	t.Run("broken reload keeps the running files", func(t *testing.T) {
		writeFile(t, f.key, ca.issue(t, "mismatch", true, "").keyPEM) // a key that does not match the cert
		p.d.reload([]string{"--config", f.config})
		if got := servedSerial(t, p.grpcAddr, roots, mapped.tls); got.Cmp(srv2.serial) != 0 {
			t.Errorf("after a reload of mismatched files, serial %v, want the running %v", got, srv2.serial)
		}
		if _, err := alphaLocks.GetLock(ctx, &coordv1.GetLockRequest{Name: "report"}); err != nil {
			t.Errorf("after a failed reload: %v", err)
		}
	})

	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("KeepAlive after half-close: %v, want EOF", err)
	}
}

// mtlsEnv is TestMutualTLS's daemon and the certificates around it.
type mtlsEnv struct {
	ca                             *testCA
	srv, mapped, unmapped, foreign issued // foreign: the mapped identity, wrong CA
	f                              mtlsFiles
	p                              *inProcess
	roots                          *x509.CertPool // trusts ca
}

// startMutualTLS issues the certificates, writes the files and starts the
// daemon with mutual TLS (verify_if_given) and auth: alpha by certificate,
// beta by API key.
func startMutualTLS(t *testing.T) *mtlsEnv {
	t.Helper()
	ca := newTestCA(t, "coordd test CA")
	otherCA := newTestCA(t, "someone else's CA")
	srv := ca.issue(t, "coordd", true, "")
	mapped := ca.issue(t, "alpha-worker", false, alphaURI)
	unmapped := ca.issue(t, "stranger", false, "spiffe://example.org/ns/nobody/sa/x")
	foreign := otherCA.issue(t, "alpha-worker", false, alphaURI) // the mapped identity, wrong CA

	dir := t.TempDir()
	f := mtlsFiles{dir: dir, cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key"),
		ca: filepath.Join(dir, "clients-ca.crt"), config: filepath.Join(dir, "coordd.yaml")}
	writeFile(t, f.cert, srv.certPEM)
	writeFile(t, f.key, srv.keyPEM)
	writeFile(t, f.ca, ca.pem)
	writeFile(t, f.config, []byte(f.yaml("    - identity: "+alphaURI+"\n      namespace: alpha\n")))

	p := startInProcess(t, func(c *Config) {
		c.TLS = TLSConfig{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca, ClientAuth: "verify_if_given"}
		c.Auth = alphaBetaAuth()
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	return &mtlsEnv{ca: ca, srv: srv, mapped: mapped, unmapped: unmapped, foreign: foreign, f: f, p: p, roots: roots}
}

// mtlsForeignCA: a certificate of another CA does not get past the
// handshake, even with a valid API key; Go's client does not even send it.
func mtlsForeignCA(ctx context.Context, t *testing.T, e *mtlsEnv) {
	t.Helper()
	roots, foreign, p := e.roots, e.foreign, e.p
	// Presented with a valid API key too: the handshake refuses it first.
	for _, v := range []struct {
		name string
		max  uint16
	}{{"TLS 1.3", tls.VersionTLS13}, {"TLS 1.2", tls.VersionTLS12}} {
		cfg := presenting(roots, foreign.tls)
		cfg.MaxVersion = v.max
		conn := tlsDialConfig(t, p.grpcAddr, cfg)
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := coordv1.NewLockServiceClient(conn).GetLock(bearerCtx(c, betaKey), &coordv1.GetLockRequest{Name: "report"})
		cancel()
		conn.Close()
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: GetLock with a certificate of another CA = %v, want UNAVAILABLE", v.name, err)
		}
		switch {
		case strings.Contains(err.Error(), "certificate"):
		case v.max == tls.VersionTLS13:
			// In TLS 1.3 the client's handshake ends before the server
			// has checked its certificate: the refusal (an alert) reaches
			// gRPC only if it reads before it writes, else it sees the
			// closed connection ("broken pipe"). Not coordd's to choose.
			t.Logf("%s: the error does not mention the certificate this time: %v", v.name, err)
		default:
			t.Errorf("%s: the error %q does not mention the certificate", v.name, err)
		}
	}
	// At the TLS level: the server refuses the handshake for the certificate.
	raw := presenting(roots, foreign.tls)
	raw.NextProtos = []string{"h2"}
	tc, err := tls.Dial("tcp", p.grpcAddr, raw)
	if err == nil {
		// TLS 1.3: the client learns of the refusal on its first read.
		_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = tc.Read(make([]byte, 1))
		tc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a TLS handshake with a certificate of another CA: %v; want refused for its certificate", err)
	}
	// Go's client, given only certificates of another CA, sends none
	// (the server names the CAs it accepts): the call is then one
	// without a certificate, and needs an API key.
	conn := tlsDial(t, p.grpcAddr, roots, &foreign.tls)
	defer conn.Close()
	_, err = coordv1.NewLockServiceClient(conn).GetLock(ctx, &coordv1.GetLockRequest{Name: "report"})
	wantCode(t, "GetLock with only a certificate of another CA (not sent)", err, codes.Unauthenticated, "UNAUTHENTICATED")
}

// openKeepAlive opens a KeepAlive stream on conn and reads its first
// answer.
func openKeepAlive(ctx context.Context, t *testing.T, conn *grpc.ClientConn) (coordv1.SessionService_KeepAliveClient, *coordv1.KeepAliveResponse) {
	t.Helper()
	sctx, scancel := context.WithCancel(ctx)
	t.Cleanup(scancel)
	stream, err := coordv1.NewSessionServiceClient(conn).KeepAlive(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return stream, first
}

// mtlsReload replaces the server certificate, maps the unmapped identity
// (in gamma) and reloads; it returns the new server certificate.
func mtlsReload(t *testing.T, e *mtlsEnv) issued {
	t.Helper()
	ca, f, p := e.ca, e.f, e.p
	srv2 := ca.issue(t, "coordd", true, "")
	writeFile(t, f.cert, srv2.certPEM)
	writeFile(t, f.key, srv2.keyPEM)
	writeFile(t, f.config, []byte(f.yaml(
		"    - identity: "+alphaURI+"\n      namespace: alpha\n"+
			"    - identity: spiffe://example.org/ns/nobody/sa/x\n      namespace: gamma\n")))
	p.d.reload([]string{"--config", f.config})
	return srv2
}

// mtlsAfterReload: new connections get the new certificate, the open
// connection and stream go on over the old handshake, and the identities
// are the reloaded ones.
func mtlsAfterReload(ctx context.Context, t *testing.T, e *mtlsEnv, srv2 issued, alphaLocks coordv1.LockServiceClient,
	unmappedConn *grpc.ClientConn, stream coordv1.SessionService_KeepAliveClient, sessionID string) {
	t.Helper()
	srv, mapped, p, roots := e.srv, e.mapped, e.p, e.roots
	if got := servedSerial(t, p.grpcAddr, roots, mapped.tls); got.Cmp(srv2.serial) != 0 {
		t.Fatalf("a new connection after the reload got serial %v, want the new %v (old %v)", got, srv2.serial, srv.serial)
	}
	// The old connection goes on, on its old handshake.
	var after peer.Peer
	info, err := alphaLocks.GetLock(ctx, &coordv1.GetLockRequest{Name: "report"}, grpc.Peer(&after))
	if err != nil || !info.GetHeld() {
		t.Fatalf("GetLock on the connection opened before the reload = %v, %v", info, err)
	}
	if got := peerSerial(t, &after); got.Cmp(srv.serial) != 0 {
		t.Errorf("the old connection's call went over serial %v, want the old %v: the connection was re-established", got, srv.serial)
	}
	if err := stream.Send(&coordv1.KeepAliveRequest{}); err != nil {
		t.Fatalf("the KeepAlive stream opened before the reload: Send: %v", err)
	}
	if r, err := stream.Recv(); err != nil || r.GetSessionId() != sessionID {
		t.Fatalf("the KeepAlive stream opened before the reload: %v, %v; want its heartbeat answered", r, err)
	}
	// A new gRPC connection sees the new certificate and works.
	conn := tlsDial(t, p.grpcAddr, roots, &mapped.tls)
	defer conn.Close()
	var fresh peer.Peer
	info, err = coordv1.NewLockServiceClient(conn).GetLock(ctx, &coordv1.GetLockRequest{Name: "report"}, grpc.Peer(&fresh))
	if err != nil || !info.GetHeld() {
		t.Fatalf("GetLock on a new connection = %v, %v", info, err)
	}
	if got := peerSerial(t, &fresh); got.Cmp(srv2.serial) != 0 {
		t.Errorf("a new gRPC connection got serial %v, want %v", got, srv2.serial)
	}
	// Identities reloaded too: the formerly unmapped certificate, on its
	// existing connection, is now in gamma.
	g, err := coordv1.NewLockServiceClient(unmappedConn).Lock(ctx, &coordv1.LockRequest{Name: "report", Ttl: durationpb.New(time.Minute), Owner: "gamma"})
	if err != nil || !g.GetAcquired() {
		t.Errorf("Lock(report) by the newly mapped certificate = %v, %v; want acquired in gamma", g, err)
	}
}

// TestTLSRequireClientCert: with client_auth require (the default with a
// client CA), a TLS client without a certificate does not get in, even with
// a valid API key.
func TestTLSRequireClientCert(t *testing.T) {
	ca := newTestCA(t, "coordd test CA")
	srv := ca.issue(t, "coordd", true, "")
	mapped := ca.issue(t, "alpha-worker", false, alphaURI)
	dir := t.TempDir()
	cert, key, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	writeFile(t, cert, srv.certPEM)
	writeFile(t, key, srv.keyPEM)
	writeFile(t, caFile, ca.pem)
	p := startInProcess(t, func(c *Config) {
		c.TLS = TLSConfig{CertFile: cert, KeyFile: key, ClientCAFile: caFile}
		c.Auth = alphaBetaAuth()
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	good := tlsDial(t, p.grpcAddr, roots, &mapped.tls)
	defer good.Close()
	waitServing(t, good, 5*time.Second, nil)
	if _, err := coordv1.NewLockServiceClient(good).GetLock(ctx, &coordv1.GetLockRequest{Name: "x"}); err != nil {
		t.Fatalf("GetLock with the mapped certificate: %v", err)
	}

	noCert := tlsDial(t, p.grpcAddr, roots, nil)
	defer noCert.Close()
	_, err := coordv1.NewLockServiceClient(noCert).GetLock(bearerCtx(ctx, betaKey), &coordv1.GetLockRequest{Name: "x"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("GetLock without a client certificate under client_auth require = %v, want UNAVAILABLE (refused at the handshake)", err)
	}
}
