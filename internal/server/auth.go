package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Authentication maps each caller to a namespace: every name a caller
// passes (lock, key, queue, session) is scoped to it, so one tenant never
// sees another's state. With auth off, every caller is in DefaultNamespace.
//
// A caller proves who it is with an API key, sent as gRPC metadata
// "authorization: Bearer <key>", or, with mutual TLS, with its client
// certificate, whose identity (a URI SAN such as a SPIFFE ID, a DNS SAN, or
// the subject's common name) is mapped to a namespace. A mapped certificate
// wins over a key.

// AuthConfig is the auth section of the configuration.
type AuthConfig struct {
	Enabled bool       `mapstructure:"enabled"`
	APIKeys []APIKey   `mapstructure:"api_keys"`
	MTLS    []Identity `mapstructure:"mtls"`
}

// APIKey maps a key to a namespace. KeySHA256 (hex) keeps the key itself out
// of the configuration; Key (e.g. from a Secret via the environment) is
// hashed on load.
type APIKey struct {
	Namespace string `mapstructure:"namespace"`
	Key       string `mapstructure:"key"`
	KeySHA256 string `mapstructure:"key_sha256"`
}

// Identity maps a client certificate identity to a namespace.
type Identity struct {
	Identity  string `mapstructure:"identity"`
	Namespace string `mapstructure:"namespace"`
}

// ValidNamespace reports whether ns is a usable namespace: 1 to 64 of
// [A-Za-z0-9._-].
func ValidNamespace(ns string) bool {
	if ns == "" || len(ns) > 64 {
		return false
	}
	for _, r := range ns {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Authenticator decides callers' namespaces. Its table can be replaced while
// serving (a configuration reload): unary calls in progress keep the old
// one, but an open stream is checked again at once, and one whose
// credential no longer gives it the same namespace (a revoked API key, an
// identity unmapped or moved) is ended with UNAUTHENTICATED (follow). Its
// session, if any, is not closed: it lapses at its TTL unless a valid
// credential resumes it.
type Authenticator struct {
	table atomic.Pointer[authTable]

	// mu orders Set's sweep of the open streams with the registration of a
	// new one, so that a stream authenticated with the old table is either
	// swept or checked against the new one when it registers.
	mu      sync.Mutex
	streams map[*followed]struct{}
}

// credential is what a call presented: kept for the life of a stream, to
// check it again when the table changes.
type credential struct {
	cert   bool     // a verified client certificate
	ids    []string // its identities (certIdentities)
	key    [sha256.Size]byte
	hasKey bool // an API key was sent; key is its digest
}

// followed is an open stream: what authenticated it, as what, and how to
// end it.
type followed struct {
	cred   credential
	ns     string
	cancel context.CancelCauseFunc
}

// errRevoked is the cause of a stream's end when a reload revokes its
// credential.
var errRevoked = errors.New("the credential of this stream was revoked by a configuration reload; " +
	"its session lives until its TTL: resume it on a new stream with a valid credential")

type authTable struct {
	enabled    bool
	keys       map[[sha256.Size]byte]string // key digest -> namespace
	identities map[string]string            // certificate identity -> namespace
}

// NewAuthenticator returns an Authenticator for cfg.
func NewAuthenticator(cfg AuthConfig) (*Authenticator, error) {
	a := &Authenticator{}
	return a, a.Set(cfg)
}

// Set replaces the table, after checking every entry; on error nothing
// changes. Errors name the configuration key.
func (a *Authenticator) Set(cfg AuthConfig) error {
	t, err := cfg.table()
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.table.Store(t)
	for s := range a.streams {
		s.check(t)
	}
	return nil
}

// Validate checks every entry, naming the configuration key of the first
// bad one: the check Set makes.
func (cfg AuthConfig) Validate() error {
	_, err := cfg.table()
	return err
}

// table checks every entry and builds the table of cfg.
func (cfg AuthConfig) table() (*authTable, error) {
	t := &authTable{enabled: cfg.Enabled, keys: map[[sha256.Size]byte]string{}, identities: map[string]string{}}
	for i, k := range cfg.APIKeys {
		field := fmt.Sprintf("auth.api_keys[%d]", i)
		if !ValidNamespace(k.Namespace) {
			return nil, fmt.Errorf("%s.namespace: %q is not 1 to 64 of [A-Za-z0-9._-]", field, k.Namespace)
		}
		var digest [sha256.Size]byte
		switch {
		case k.Key != "" && k.KeySHA256 != "":
			return nil, fmt.Errorf("%s: set key or key_sha256, not both", field)
		case k.Key != "":
			if len(k.Key) < 16 {
				return nil, fmt.Errorf("%s.key: shorter than 16 characters", field)
			}
			digest = sha256.Sum256([]byte(k.Key))
		default:
			b, err := hex.DecodeString(k.KeySHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s.key_sha256: want 64 hex digits (sha256 of the key)", field)
			}
			copy(digest[:], b)
		}
		if _, dup := t.keys[digest]; dup {
			return nil, fmt.Errorf("%s: the same key is configured twice", field)
		}
		t.keys[digest] = k.Namespace
	}
	for i, id := range cfg.MTLS {
		field := fmt.Sprintf("auth.mtls[%d]", i)
		if id.Identity == "" {
			return nil, fmt.Errorf("%s.identity: is required", field)
		}
		if !ValidNamespace(id.Namespace) {
			return nil, fmt.Errorf("%s.namespace: %q is not 1 to 64 of [A-Za-z0-9._-]", field, id.Namespace)
		}
		t.identities[id.Identity] = id.Namespace
	}
	if t.enabled && len(t.keys) == 0 && len(t.identities) == 0 {
		return nil, fmt.Errorf("auth.enabled: no auth.api_keys or auth.mtls to authenticate anyone with")
	}
	return t, nil
}

// check ends the stream if t does not give its credential its namespace.
func (s *followed) check(t *authTable) {
	if ns, err := t.namespaceFor(s.cred); err != nil || ns != s.ns {
		s.cancel(errRevoked)
	}
}

// follow registers a stream that cred authenticated as ns, for as long as
// it runs: the returned context is cancelled with cause errRevoked as soon
// as a table that does not give cred the namespace ns is Set (at once, if
// one was Set since the stream was authenticated). stop unregisters it.
func (a *Authenticator) follow(ctx context.Context, cred credential, ns string) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &followed{cred: cred, ns: ns, cancel: cancel}
	a.mu.Lock()
	if a.streams == nil {
		a.streams = make(map[*followed]struct{})
	}
	a.streams[s] = struct{}{}
	s.check(a.table.Load())
	a.mu.Unlock()
	return ctx, func() {
		a.mu.Lock()
		delete(a.streams, s)
		a.mu.Unlock()
		cancel(nil)
	}
}

// Enabled reports whether callers must authenticate.
func (a *Authenticator) Enabled() bool { return a != nil && a.table.Load().enabled }

// authError is a refusal with its reason for the metrics.
type authError struct {
	code   codes.Code
	reason string
	msg    string
}

func (e *authError) Error() string { return e.msg }

// namespaceOf authenticates the caller of ctx.
func (a *Authenticator) namespaceOf(ctx context.Context) (string, error) {
	if a == nil {
		return DefaultNamespace, nil
	}
	t := a.table.Load()
	if !t.enabled {
		return DefaultNamespace, nil
	}
	return t.namespaceFor(credentialOf(ctx))
}

// NamespaceOfKey is the namespace the API key key gives now, as for a gRPC
// call that sends it as "authorization: Bearer <key>": DefaultNamespace
// when auth is off; with auth on an error (UNAUTHENTICATED) for an unknown
// or empty key. A key revoked by a reload fails at once.
func (a *Authenticator) NamespaceOfKey(key string) (string, error) {
	if a == nil {
		return DefaultNamespace, nil
	}
	t := a.table.Load()
	if !t.enabled {
		return DefaultNamespace, nil
	}
	c := credential{}
	if key != "" {
		c = credential{key: sha256.Sum256([]byte(key)), hasKey: true}
	}
	ns, err := t.namespaceFor(c)
	var ae *authError
	if errors.As(err, &ae) {
		return "", withDetails(ae.code, ae.msg, ae.reason, nil)
	}
	return ns, err
}

// credentialOf reads what the caller of ctx presented.
func credentialOf(ctx context.Context) credential {
	var c credential
	if cert := verifiedClientCert(ctx); cert != nil {
		c.cert, c.ids = true, certIdentities(cert)
	}
	if key := bearer(ctx); key != "" {
		c.key, c.hasKey = sha256.Sum256([]byte(key)), true
	}
	return c
}

// namespaceFor is the namespace t gives c, or why it gives none.
func (t *authTable) namespaceFor(c credential) (string, error) {
	if !t.enabled {
		return DefaultNamespace, nil
	}
	for _, id := range c.ids {
		if ns, ok := t.identities[id]; ok {
			return ns, nil
		}
	}
	if !c.hasKey {
		if c.cert {
			return "", &authError{codes.PermissionDenied, "PERMISSION_DENIED", "the client certificate's identity is not mapped to a namespace"}
		}
		return "", &authError{codes.Unauthenticated, "UNAUTHENTICATED", "authentication required: send \"authorization: Bearer <API key>\" or a mapped client certificate"}
	}
	ns, ok := t.keys[c.key]
	if !ok {
		return "", &authError{codes.Unauthenticated, "UNAUTHENTICATED", "unknown API key"}
	}
	return ns, nil
}

// bearer returns the API key of the call's authorization metadata. The
// scheme is case-insensitive (RFC 7235: "bearer", "BEARER" are "Bearer"),
// and may be followed by several spaces.
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, k, ok := strings.Cut(strings.TrimSpace(v), " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(k)
		}
	}
	return ""
}

func verifiedClientCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return ti.State.VerifiedChains[0][0]
}

// certIdentities lists the identities a certificate can be mapped by: its
// URI SANs, its DNS SANs, then its subject's common name.
func certIdentities(c *x509.Certificate) []string {
	var ids []string
	for _, u := range c.URIs {
		ids = append(ids, u.String())
	}
	ids = append(ids, c.DNSNames...)
	if c.Subject.CommonName != "" {
		ids = append(ids, c.Subject.CommonName)
	}
	return ids
}
