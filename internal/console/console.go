// Package console is coordd's web console for operators, served on the HTTP
// port at /ui/ when ui.enabled is set: queues and their dead letters,
// locks, semaphores, elections, rate-limit policies, and this instance's
// sessions and store health.
//
// In Redlock mode (redis.mode redlock) the store serves exclusive locks
// only: the page says so (whoami), and an endpoint whose service answers
// FAILED_PRECONDITION REDLOCK_MODE (or whose store call returns
// store.ErrRedlockMode) answers {"not_served": …} rather than an error, which
// the page shows as "not served in Redlock mode".
//
// Every read and action goes through server.Local: the gRPC API's handlers,
// validation, limits and error table, in the caller's namespace. With auth
// on, the page sends an API key as "Authorization: Bearer <key>" on every
// request to the JSON endpoints; the namespace is the one the gRPC API
// gives that key (server.Authenticator.NamespaceOfKey), so the console sees
// exactly what that key could see over gRPC. Nothing the console sends
// carries a lock or semaphore token, a receipt or a session ID: the JSON is
// built from explicit structs, never from a response message as a whole.
//
// Against attacks from other pages in the operator's browser: the JSON
// endpoints want a custom header (X-Coordd-Console), which a cross-site
// page can only send after a CORS preflight that is never answered;
// mutations are POSTs with a JSON body; requests whose Host is not an IP
// literal, localhost or a configured name are refused (DNS rebinding); and
// every page has a strict Content-Security-Policy. The static files are
// embedded: no build step, no third-party assets.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
)

//go:embed static
var static embed.FS

// Header is the header every request to the JSON endpoints must carry
// (any value): a cross-site page cannot send it without a CORS preflight,
// which the console never answers.
const Header = "X-Coordd-Console"

// Limits of what one request may ask.
const (
	maxExtraQueues = 50      // queue names a request adds to the list
	maxBody        = 1 << 20 // a POST's JSON body, bytes
	callTimeout    = 5 * time.Second
	previewBytes   = 256 // of a dead letter's payload
)

// Options configure the console.
type Options struct {
	Local *server.Local
	// Auth gives a request's API key its namespace; nil or disabled: every
	// request is in server.DefaultNamespace.
	Auth *server.Authenticator
	// Nodes, if not nil, reports the store's nodes (the redis and memory
	// stores implement it).
	Nodes store.NodeHealther
	// Queues are the queue names the configuration mentions, by namespace
	// (partitioned queues, metrics.queues): listed even before this
	// instance serves them.
	Queues map[string][]string
	// Activity, if not nil, lists every queue of a namespace any instance
	// served lately and tells each one's last hour (the queues page and its
	// charts); nil: this instance's queues only, and no charts.
	Activity store.QueueActivity
	// AllowedHosts are the host names (besides IP literals and localhost)
	// the console answers to: ui.allowed_hosts.
	AllowedHosts []string
	// Redlock says that coordd runs in Redlock mode (redis.mode redlock):
	// it serves exclusive locks only, so the page shows the other services
	// as not served.
	Redlock bool
	Log     *slog.Logger // nil: slog.Default()
}

// Console serves /ui/.
type Console struct {
	o     Options
	mux   *http.ServeMux
	hosts map[string]bool
}

// New returns the console's handler, to mount at /ui/ on the HTTP mux.
func New(o Options) *Console {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	c := &Console{o: o, mux: http.NewServeMux(), hosts: map[string]bool{"localhost": true}}
	for _, h := range o.AllowedHosts {
		c.hosts[strings.ToLower(h)] = true
	}
	files, _ := fs.Sub(static, "static")
	fileServer := http.StripPrefix("/ui/", http.FileServerFS(files))
	c.mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/ui/api/") {
			writeError(w, http.StatusNotFound, "no such endpoint")
			return
		}
		fileServer.ServeHTTP(w, r)
	})
	c.mux.HandleFunc("GET /ui/api/whoami", c.api(c.whoami))
	c.mux.HandleFunc("GET /ui/api/queues", c.api(c.queues))
	c.mux.HandleFunc("GET /ui/api/deadletters", c.api(c.deadLetters))
	c.mux.HandleFunc("POST /ui/api/redrive", c.api(c.redrive))
	c.mux.HandleFunc("POST /ui/api/purge", c.api(c.purge))
	c.mux.HandleFunc("POST /ui/api/pause", c.api(c.pause))
	c.mux.HandleFunc("GET /ui/api/lock", c.api(c.lock))
	c.mux.HandleFunc("GET /ui/api/semaphore", c.api(c.semaphore))
	c.mux.HandleFunc("GET /ui/api/leader", c.api(c.leader))
	c.mux.HandleFunc("GET /ui/api/policies", c.api(c.policies))
	c.mux.HandleFunc("POST /ui/api/policy/put", c.api(c.putPolicy))
	c.mux.HandleFunc("POST /ui/api/policy/delete", c.api(c.deletePolicy))
	c.mux.HandleFunc("GET /ui/api/allow", c.api(c.allow))
	c.mux.HandleFunc("GET /ui/api/health", c.api(c.health))
	return c
}

// ServeHTTP checks the Host, sets the security headers, and serves.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if !c.hostAllowed(r.Host) {
		http.Error(w, "host not allowed: add it to ui.allowed_hosts", http.StatusMisdirectedRequest)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// hostAllowed: an IP literal, localhost, or a configured name. Any other
// name could be an attacker's, rebound to this address (DNS rebinding).
func (c *Console) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil {
		return true
	}
	return c.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// request is one authenticated JSON request.
type request struct {
	*http.Request
	ctx context.Context
	ns  string
}

// api wraps a JSON endpoint: the custom header, the namespace of the API
// key, a deadline, and the answer as JSON (or an error).
func (c *Console) api(f func(request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(Header) == "" {
			writeError(w, http.StatusForbidden, "missing the "+Header+" header")
			return
		}
		if r.Method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, "the body must be application/json")
			return
		}
		ns, err := c.o.Auth.NamespaceOfKey(bearer(r))
		if err != nil {
			writeError(w, http.StatusUnauthorized, status.Convert(err).Message())
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
		defer cancel()
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		resp, err := f(request{Request: r, ctx: ctx, ns: ns})
		switch {
		case redlockMode(err):
			resp = map[string]string{"not_served": notServed}
		case err != nil:
			writeError(w, httpCode(err), message(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}
}

func (c *Console) authEnabled() bool { return c.o.Auth.Enabled() }

func bearer(r *http.Request) string {
	scheme, key, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}

// badRequest is an error of the console's own input checks.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// notServed is what an endpoint answers, as "not_served", when its service
// is not served in Redlock mode.
const notServed = "not served in Redlock mode: this coordd serves exclusive locks only"

// redlockMode reports whether err is the refusal of a service that coordd
// does not serve in Redlock mode: the API's FAILED_PRECONDITION reason
// REDLOCK_MODE (told by its ErrorInfo), or the store's own error.
func redlockMode(err error) bool {
	if errors.Is(err, store.ErrRedlockMode) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == server.ErrorDomain && info.GetReason() == "REDLOCK_MODE" {
			return true
		}
	}
	return false
}

func httpCode(err error) int {
	var br badRequest
	if errors.As(err, &br) {
		return http.StatusBadRequest
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.FailedPrecondition, codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded, codes.Canceled:
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// message is what the page shows of err: the API's status message, which
// the API's error table already made fit for a client.
func message(err error) string {
	var br badRequest
	if errors.As(err, &br) {
		return br.msg
	}
	return status.Convert(err).Message()
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// decode reads a POST's JSON body into v, refusing unknown fields.
func decode(r request, v any) error {
	d := json.NewDecoder(r.Body)
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return badRequest{"bad JSON body: " + err.Error()}
	}
	return nil
}

func (c *Console) whoami(r request) (any, error) {
	return map[string]any{"namespace": r.ns, "auth": c.authEnabled(), "redlock": c.o.Redlock}, nil
}

// names is the sorted union of a namespace's queue names.
func names(sets ...[]string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
