package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/console"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"google.golang.org/grpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	keyA = "key-of-team-a-0123456789"
	keyB = "key-of-team-b-0123456789"
)

// fakeNodes is a store of two nodes with addresses, and one without an
// address or a breaker (as the memory store's).
type fakeNodes struct{}

func (fakeNodes) NodeHealth(context.Context) []store.Node {
	return []store.Node{
		{Addr: "10.1.2.3:6379", Role: "master", Reachable: true, Latency: time.Millisecond, Breaker: "closed"},
		{Addr: "10.1.2.4:6379", Role: "replica", Breaker: "open"},
		{Role: "memory", Reachable: true},
	}
}

type fixture struct {
	conn *grpc.ClientConn
	ui   *console.Console
	log  *strings.Builder
	auth *server.Authenticator
}

func newFixture(t *testing.T, auth *server.Authenticator) *fixture {
	return newFixtureOn(t, auth, memory.New(memory.Options{Clock: clock.Real{}}))
}

// newFixtureOn is newFixture on st (a storetest.Faulty, say), with more
// options of the server (config policies, say).
func newFixtureOn(t *testing.T, auth *server.Authenticator, st store.Store, opts ...servertest.Option) *fixture {
	return newFixtureWith(t, auth, st, nil, opts...)
}

// newFixtureWith is newFixtureOn with the console's options changed by
// tune (if not nil).
func newFixtureWith(t *testing.T, auth *server.Authenticator, st store.Store, tune func(*console.Options), opts ...servertest.Option) *fixture {
	t.Cleanup(func() { _ = st.Close() })
	local := &server.Local{}
	conn := servertest.Serve(t, st, clock.Real{}, append(opts, servertest.WithServerOptions(func(o *server.Options) {
		o.Local, o.Auth = local, auth
	}))...)
	f := &fixture{conn: conn, log: &strings.Builder{}, auth: auth}
	o := console.Options{
		Local: local, Auth: auth, Nodes: fakeNodes{}, AllowedHosts: []string{"coordd.internal"},
		Queues: map[string][]string{"team-a": {"configured"}},
		Log:    slog.New(slog.NewTextHandler(f.log, nil)),
	}
	if tune != nil {
		tune(&o)
	}
	f.ui = console.New(o)
	return f
}

func twoKeys(t *testing.T) *server.Authenticator {
	a, err := server.NewAuthenticator(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{
		{Namespace: "team-a", Key: keyA}, {Namespace: "team-b", Key: keyB},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// do sends a request as the page does (the custom header, the key if not
// empty) and returns the status and body.
func (f *fixture) do(t *testing.T, method, path, key, body string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Host = "127.0.0.1:8080"
	r.Header.Set(console.Header, "1")
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	w := httptest.NewRecorder()
	f.ui.ServeHTTP(w, r)
	return w.Code, w.Body.String(), w.Header()
}

func as(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
}

func TestHostCheck(t *testing.T) {
	f := newFixture(t, nil)
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "[::1]:8080": 200, "localhost:8080": 200, "LOCALHOST": 200,
		"coordd.internal:8080": 200, "10.0.0.5": 200,
		"evil.example:8080": http.StatusMisdirectedRequest, "": http.StatusMisdirectedRequest,
		"127.0.0.1.evil.example": http.StatusMisdirectedRequest,
	} {
		r := httptest.NewRequest("GET", "/ui/api/whoami", nil)
		r.Host = host
		r.Header.Set(console.Header, "1")
		w := httptest.NewRecorder()
		f.ui.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
}

func TestSecurityHeadersAndPage(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/api/whoami"} {
		code, body, h := f.do(t, "GET", path, "", "")
		if code != 200 {
			t.Errorf("%s: %d %s", path, code, body)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
}

// TestCrossSite: without the custom header (which a cross-site page cannot
// send without a preflight), nothing is served; a mutation needs POST and
// a JSON body.
func TestCrossSite(t *testing.T) {
	f := newFixture(t, nil)
	r := httptest.NewRequest("POST", "/ui/api/redrive", strings.NewReader(`{"queue":"q","all":true}`))
	r.Host = "127.0.0.1"
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	f.ui.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Errorf("POST without the header: %d, want 403", w.Code)
	}
	r = httptest.NewRequest("POST", "/ui/api/redrive", strings.NewReader(`queue=q&all=true`))
	r.Host = "127.0.0.1"
	r.Header.Set(console.Header, "1")
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	f.ui.ServeHTTP(w, r)
	if w.Code != http.StatusUnsupportedMediaType {
		t.Errorf("POST of a form: %d, want 415", w.Code)
	}
	if code, _, _ := f.do(t, "GET", "/ui/api/redrive?queue=q&all=true", "", ""); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Errorf("GET of a mutation: %d, want 404 or 405", code)
	}
	if code, _, _ := f.do(t, "OPTIONS", "/ui/api/redrive", "", ""); code == http.StatusOK || code == http.StatusNoContent {
		t.Errorf("a preflight was answered: %d", code)
	}
}

func TestAuth(t *testing.T) {
	f := newFixture(t, twoKeys(t))
	for _, key := range []string{"", "wrong-key-0123456789abcdef"} {
		if code, body, _ := f.do(t, "GET", "/ui/api/queues", key, ""); code != http.StatusUnauthorized {
			t.Errorf("key %q: %d %s, want 401", key, code, body)
		}
	}
	qa := coordv1.NewQueueServiceClient(f.conn)
	if _, err := qa.Enqueue(as(keyA), &coordv1.EnqueueRequest{Queue: "a-jobs", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	_, a, _ := f.do(t, "GET", "/ui/api/queues", keyA, "")
	_, b, _ := f.do(t, "GET", "/ui/api/queues", keyB, "")
	if !strings.Contains(a, `"name":"a-jobs","ready":1`) || !strings.Contains(a, `"configured"`) {
		t.Errorf("team-a's queues: %s", a)
	}
	if strings.Contains(b, "a-jobs") || strings.Contains(b, "configured") {
		t.Errorf("team-b sees team-a's queues: %s", b)
	}
	// Asking for the other namespace's queue by name gives this namespace's
	// (empty) queue of that name.
	_, b, _ = f.do(t, "GET", "/ui/api/queues?name=a-jobs", keyB, "")
	if !strings.Contains(b, `"name":"a-jobs","ready":0`) {
		t.Errorf("team-b asking for a-jobs: %s", b)
	}
	// Health: no addresses, and only the caller's streams.
	_, h, _ := f.do(t, "GET", "/ui/api/health", keyA, "")
	if strings.Contains(h, "10.1.2.") || !strings.Contains(h, `"role":"replica"`) {
		t.Errorf("health with auth on: %s", h)
	}
	// A key revoked by a reload stops at once.
	if err := f.auth.Set(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{{Namespace: "team-b", Key: keyB}}}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := f.do(t, "GET", "/ui/api/queues", keyA, ""); code != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d, want 401", code)
	}
}

func TestHealthAuthOff(t *testing.T) {
	f := newFixture(t, nil)
	_, h, _ := f.do(t, "GET", "/ui/api/health", "", "")
	if !strings.Contains(h, `"addr":"10.1.2.3:6379"`) || !strings.Contains(h, `"breaker":"open"`) {
		t.Errorf("health with auth off: %s", h)
	}
	// A node without a breaker (the memory store's) says so, for the page
	// to show, instead of leaving the field out.
	if !strings.Contains(h, `"role":"memory","reachable":true,"latency_ms":0,"breaker":"none"`) {
		t.Errorf("health of a node without a breaker: %s", h)
	}
}

// TestNoSecrets: what the console sends about a held lock, semaphore and
// election carries no token, and no session ID.
func TestNoSecrets(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	g, err := coordv1.NewLockServiceClient(f.conn).Lock(ctx, &coordv1.LockRequest{Name: "db", Ttl: durationpb.New(time.Minute), Owner: "alice"})
	if err != nil || !g.GetAcquired() {
		t.Fatal(g, err)
	}
	s, err := coordv1.NewSemaphoreServiceClient(f.conn).Acquire(ctx, &coordv1.AcquireRequest{Name: "pool", Limit: 2, Ttl: durationpb.New(time.Minute), Owner: "bob"})
	if err != nil || !s.GetAcquired() {
		t.Fatal(s, err)
	}
	secrets := []string{g.GetToken(), s.GetToken()}
	var all strings.Builder
	for _, path := range []string{"/ui/api/lock?name=db", "/ui/api/semaphore?name=pool", "/ui/api/leader?name=db", "/ui/api/health", "/ui/api/queues"} {
		code, body, _ := f.do(t, "GET", path, "", "")
		if code != 200 {
			t.Errorf("%s: %d %s", path, code, body)
		}
		all.WriteString(body)
	}
	out := all.String()
	if !strings.Contains(out, `"owner":"alice","fence":"`) || !strings.Contains(out, `"owner":"bob"`) {
		t.Errorf("holders missing: %s", out)
	}
	for _, sec := range secrets {
		if sec == "" || strings.Contains(out, sec) {
			t.Errorf("a token (%q) reached the console's JSON: %s", sec, out)
		}
	}
	if strings.Contains(strings.ToLower(out), "token") || strings.Contains(out, "session_id") {
		t.Errorf("a token or session field in the JSON: %s", out)
	}
}

func TestBadInput(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct {
		method, path, body string
		want               int
		msg                string
	}{
		{"GET", "/ui/api/lock?name=", "", 400, "name"},
		{"GET", "/ui/api/queues?" + strings.Repeat("name=q&", 51), "", 400, "at most 50"},
		{"POST", "/ui/api/redrive", `{"queue":"q"}`, 400, "either all or message_ids"},
		{"POST", "/ui/api/redrive", `{"queue":"q","all":true,"message_ids":["x"]}`, 400, "either all or message_ids"},
		{"POST", "/ui/api/redrive", `{"queue":"q","all":true,"extra":1}`, 400, "unknown field"},
		{"POST", "/ui/api/redrive", `{"queue":"","all":true}`, 400, "queue"},
		{"POST", "/ui/api/purge", `{"queue":"q","confirm":"p"}`, 400, "confirm"},
		{"GET", "/ui/api/allow?policy=nope&key=k", "", 400, "policy"},
		{"GET", "/ui/api/nope", "", 404, "no such endpoint"},
	} {
		code, body, _ := f.do(t, c.method, c.path, "", c.body)
		var j struct{ Error string }
		_ = json.Unmarshal([]byte(body), &j)
		if code != c.want || !strings.Contains(j.Error, c.msg) {
			t.Errorf("%s %s %s: %d %s, want %d and an error naming %q", c.method, c.path, c.body, code, body, c.want, c.msg)
		}
	}
}

// TestRedriveLogged: Redrive all moves the dead letters back to ready, and
// is logged with the namespace.
func TestRedriveLogged(t *testing.T) {
	f := newFixture(t, twoKeys(t))
	q := coordv1.NewQueueServiceClient(f.conn)
	ctx := as(keyA)
	for range 3 {
		if _, err := q.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("p"), MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := q.Claim(ctx, &coordv1.ClaimRequest{Queue: "jobs", MaxMessages: 3, VisibilityTimeout: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.GetMessages() {
		if _, err := q.Nack(ctx, &coordv1.NackRequest{Queue: "jobs", Receipt: m.GetReceipt()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, body, _ := f.do(t, "GET", "/ui/api/queues", keyA, ""); !strings.Contains(body, `"dead":3`) {
		t.Fatalf("before: %s", body)
	}
	_, body, _ := f.do(t, "GET", "/ui/api/deadletters?queue=jobs", keyA, "")
	var dl struct {
		DeadLetters []struct {
			MessageID string `json:"message_id"`
			Preview   string
			Attempts  int
		} `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(body), &dl); err != nil || len(dl.DeadLetters) != 3 || dl.DeadLetters[0].Preview != "p" || dl.DeadLetters[0].Attempts != 1 {
		t.Fatalf("dead letters: %s (%v)", body, err)
	}
	for _, m := range c.GetMessages() {
		if strings.Contains(body, m.GetReceipt()) {
			t.Errorf("a receipt in the dead letters' JSON: %s", body)
		}
	}
	code, body, _ := f.do(t, "POST", "/ui/api/redrive", keyA, `{"queue":"jobs","message_ids":["`+dl.DeadLetters[0].MessageID+`"]}`)
	if code != 200 || !strings.Contains(body, `"moved":1`) {
		t.Fatalf("redrive one: %d %s", code, body)
	}
	code, body, _ = f.do(t, "POST", "/ui/api/redrive", keyA, `{"queue":"jobs","all":true}`)
	if code != 200 || !strings.Contains(body, `"moved":2`) {
		t.Fatalf("redrive all: %d %s", code, body)
	}
	if _, body, _ := f.do(t, "GET", "/ui/api/queues", keyA, ""); !strings.Contains(body, `"ready":3`) {
		t.Errorf("after: %s", body)
	}
	if log := f.log.String(); !strings.Contains(log, "console: redrive") || !strings.Contains(log, "namespace=team-a") {
		t.Errorf("the redrive was not logged with its namespace:\n%s", log)
	}
}

// TestPurgeLogged: a purge that repeats the queue's name deletes the dead
// letters, and is logged with the namespace; team-b's purge of the same
// name touches nothing of team-a's.
func TestPurgeLogged(t *testing.T) {
	f := newFixture(t, twoKeys(t))
	q := coordv1.NewQueueServiceClient(f.conn)
	ctx := as(keyA)
	for range 2 {
		if _, err := q.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("p"), MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := q.Claim(ctx, &coordv1.ClaimRequest{Queue: "jobs", MaxMessages: 2, VisibilityTimeout: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.GetMessages() {
		if _, err := q.Nack(ctx, &coordv1.NackRequest{Queue: "jobs", Receipt: m.GetReceipt()}); err != nil {
			t.Fatal(err)
		}
	}
	if code, body, _ := f.do(t, "POST", "/ui/api/purge", keyB, `{"queue":"jobs","confirm":"jobs"}`); code != 200 || !strings.Contains(body, `"purged":0`) {
		t.Fatalf("team-b's purge: %d %s", code, body)
	}
	code, body, _ := f.do(t, "POST", "/ui/api/purge", keyA, `{"queue":"jobs","confirm":"jobs"}`)
	if code != 200 || !strings.Contains(body, `"purged":2,"remaining":0`) {
		t.Fatalf("purge: %d %s", code, body)
	}
	if log := f.log.String(); !strings.Contains(log, "console: purge dead letters") || !strings.Contains(log, "namespace=team-a") {
		t.Errorf("the purge was not logged with its namespace:\n%s", log)
	}
}

// TestPurgeAnswerLost: when the store purges but its answer is lost, the
// console reports the outcome as unknown (503, and says so), never as a
// plain failure; the attempt is logged with the namespace all the same.
func TestPurgeAnswerLost(t *testing.T) {
	st := storetest.NewFaulty(memory.New(memory.Options{Clock: clock.Real{}}))
	f := newFixtureOn(t, twoKeys(t), st)
	q := coordv1.NewQueueServiceClient(f.conn)
	ctx := as(keyA)
	if _, err := q.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("p"), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	c, err := q.Claim(ctx, &coordv1.ClaimRequest{Queue: "jobs", MaxMessages: 1, VisibilityTimeout: durationpb.New(time.Minute)})
	if err != nil || len(c.GetMessages()) != 1 {
		t.Fatalf("claim: %v %v", c, err)
	}
	if _, err := q.Nack(ctx, &coordv1.NackRequest{Queue: "jobs", Receipt: c.GetMessages()[0].GetReceipt()}); err != nil {
		t.Fatal(err)
	}
	st.Set("PurgeDead", storetest.Fault{FailAfter: true, Times: 1})
	code, body, _ := f.do(t, "POST", "/ui/api/purge", keyA, `{"queue":"jobs","confirm":"jobs"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "outcome of the last batch is unknown") {
		t.Fatalf("purge whose answer was lost: %d %s; want 503 saying the outcome is unknown", code, body)
	}
	if s, err := q.Stats(ctx, &coordv1.StatsRequest{Queue: "jobs"}); err != nil || s.GetDead() != 0 {
		t.Fatalf("the store did purge (the fault came after): %v %v", s, err)
	}
	if log := f.log.String(); !strings.Contains(log, "console: purge dead letters") || !strings.Contains(log, "namespace=team-a") {
		t.Errorf("the failed purge was not logged with its namespace:\n%s", log)
	}
}

// TestStoreErrorHidesAddresses: with auth on, a store failure reaches the
// console's user without the failure's text, which names the store's
// nodes (the queue list's Stats and a lock's lookup, as the gRPC API
// answers them).
func TestStoreErrorHidesAddresses(t *testing.T) {
	st := storetest.NewFaulty(memory.New(memory.Options{Clock: clock.Real{}}))
	f := newFixtureOn(t, twoKeys(t), st)
	fail := fmt.Errorf("redis: %w: dial tcp 10.9.8.7:18379: connect: connection refused", store.ErrUnavailable)
	st.FailWith("Stats", fail)
	st.FailWith("GetHolds", fail)
	for _, path := range []string{"/ui/api/queues", "/ui/api/lock?kind=lock&name=x"} {
		code, body, _ := f.do(t, "GET", path, keyA, "")
		if strings.Contains(body, "10.9.8.7") || code == http.StatusOK && !strings.Contains(body, "unavailable") {
			t.Errorf("GET %s: %d %s; want the failure without the store's address", path, code, body)
		}
	}
}

// TestPauseLogged: a pause and a resume from the console change the
// queue of the key's namespace only, show in the queue list, and are
// logged with the namespace.
func TestPauseLogged(t *testing.T) {
	f := newFixture(t, twoKeys(t))
	q := coordv1.NewQueueServiceClient(f.conn)
	if _, err := q.Enqueue(as(keyA), &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := f.do(t, "POST", "/ui/api/pause", keyA, `{"queue":"jobs","paused":true}`); code != 200 || strings.TrimSpace(body) != `{"paused":true}` {
		t.Fatalf("pause: %d %s", code, body)
	}
	if _, body, _ := f.do(t, "GET", "/ui/api/queues", keyA, ""); !strings.Contains(body, `"paused":true`) {
		t.Fatalf("team-a's queues after the pause: %s", body)
	}
	if st, err := q.Stats(as(keyB), &coordv1.StatsRequest{Queue: "jobs"}); err != nil || st.GetPaused() {
		t.Fatalf("team-b's queue of the same name: %v, %v", st, err)
	}
	if code, body, _ := f.do(t, "POST", "/ui/api/pause", keyA, `{"queue":"jobs","paused":false}`); code != 200 || strings.TrimSpace(body) != `{"paused":false}` {
		t.Fatalf("resume: %d %s", code, body)
	}
	if code, _, _ := f.do(t, "POST", "/ui/api/pause", keyA, `{"queue":"","paused":true}`); code != 400 {
		t.Fatalf("pause of no queue: %d, want 400", code)
	}
	if log := f.log.String(); strings.Count(log, "console: pause") < 2 || !strings.Contains(log, "namespace=team-a") {
		t.Errorf("the pause and resume were not logged with their namespace:\n%s", log)
	}
}

// TestPolicies: the console lists the config's policies and the
// namespace's runtime ones apart, puts and deletes runtime ones (logged
// with the namespace), refuses a config policy's name, and shows another
// namespace none of them.
func TestPolicies(t *testing.T) {
	f := newFixtureOn(t, twoKeys(t), memory.New(memory.Options{Clock: clock.Real{}}), servertest.WithConfig(func(c *server.Config) {
		c.Policies = map[string]limiter.Policy{
			"api": {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 100, Period: time.Second}, OnStoreFailure: limiter.FailOpen},
		}
	}))
	type listed struct {
		Runtime, Config []struct {
			Name           string `json:"name"`
			OnStoreFailure string `json:"on_store_failure"`
			Shadow         bool   `json:"shadow"`
			Limits         []struct {
				Name, Algorithm, Period string
				Limit, Burst            int64
			} `json:"limits"`
		}
	}
	list := func(key string) listed {
		t.Helper()
		code, body, _ := f.do(t, "GET", "/ui/api/policies", key, "")
		var l listed
		if err := json.Unmarshal([]byte(body), &l); code != 200 || err != nil {
			t.Fatalf("policies: %d %s (%v)", code, body, err)
		}
		return l
	}
	if l := list(keyA); len(l.Runtime) != 0 || len(l.Config) != 1 || l.Config[0].Name != "api" || l.Config[0].OnStoreFailure != "fail_open" {
		t.Fatalf("policies before any put: %+v, want api from the config only", l)
	}

	put := `{"name":"per-user","limits":[{"algorithm":"token_bucket","limit":10,"period":"1s","burst":20}],"on_store_failure":"local","shadow":true}`
	if code, body, _ := f.do(t, "POST", "/ui/api/policy/put", keyA, put); code != 200 || strings.TrimSpace(body) != `{"created":true}` {
		t.Fatalf("put: %d %s", code, body)
	}
	several := `{"name":"partner","limits":[{"name":"second","algorithm":"token_bucket","limit":10,"period":"1s"},{"name":"day","algorithm":"fixed_window","limit":1000,"period":"24h"}]}`
	if code, body, _ := f.do(t, "POST", "/ui/api/policy/put", keyA, several); code != 200 {
		t.Fatalf("put of several limits: %d %s", code, body)
	}
	l := list(keyA)
	if len(l.Config) != 1 || len(l.Runtime) != 2 {
		t.Fatalf("policies after the puts: %+v, want api from the config, partner and per-user at runtime", l)
	}
	if p := l.Runtime[1]; p.Name != "per-user" || p.OnStoreFailure != "local" || !p.Shadow || len(p.Limits) != 1 ||
		p.Limits[0].Algorithm != "token_bucket" || p.Limits[0].Limit != 10 || p.Limits[0].Period != "1s" || p.Limits[0].Burst != 20 {
		t.Errorf("per-user listed as %+v", p)
	}
	if p := l.Runtime[0]; p.Name != "partner" || p.OnStoreFailure != "fail_closed" || len(p.Limits) != 2 || p.Limits[1].Name != "day" {
		t.Errorf("partner listed as %+v", p)
	}
	if code, body, _ := f.do(t, "GET", "/ui/api/allow?policy=per-user&key=k", keyA, ""); code != 200 || !strings.Contains(body, `"allowed":true`) {
		t.Errorf("a peek under the runtime policy: %d %s", code, body)
	}
	if l := list(keyB); len(l.Runtime) != 0 {
		t.Errorf("team-b sees team-a's runtime policies: %+v", l.Runtime)
	}

	for _, c := range []struct {
		body string
		want int
		msg  string
	}{
		{`{"name":"api","limits":[{"algorithm":"fixed_window","limit":1,"period":"1s"}]}`, 409, "config policy"},
		{`{"name":"x","limits":[{"algorithm":"fixed_window","limit":0,"period":"1s"}]}`, 400, "policy.limit.limit"},
		{`{"name":"x","limits":[{"algorithm":"quadratic","limit":1,"period":"1s"}]}`, 400, "limits[0].algorithm"},
		{`{"name":"x","limits":[{"algorithm":"fixed_window","limit":1,"period":"soon"}]}`, 400, "limits[0].period"},
		{`{"name":"x","limits":[{"algorithm":"fixed_window","limit":1,"period":"1s"}],"on_store_failure":"open"}`, 400, "on_store_failure"},
		{`{"name":"x","extra":1}`, 400, "unknown field"},
	} {
		code, body, _ := f.do(t, "POST", "/ui/api/policy/put", keyA, c.body)
		if code != c.want || !strings.Contains(body, c.msg) {
			t.Errorf("put %s: %d %s, want %d naming %q", c.body, code, body, c.want, c.msg)
		}
	}

	if code, body, _ := f.do(t, "POST", "/ui/api/policy/delete", keyA, `{"name":"per-user"}`); code != 200 || strings.TrimSpace(body) != `{"deleted":true}` {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, _, _ := f.do(t, "POST", "/ui/api/policy/delete", keyA, `{"name":"api"}`); code != 409 {
		t.Errorf("delete of a config policy: %d, want 409", code)
	}
	if l := list(keyA); len(l.Runtime) != 1 || l.Runtime[0].Name != "partner" {
		t.Errorf("runtime policies after the delete: %+v, want partner", l.Runtime)
	}
	log := f.log.String()
	for _, want := range []string{"console: put policy", "console: delete policy", "namespace=team-a", "policy=per-user"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q:\n%s", want, log)
		}
	}
}
