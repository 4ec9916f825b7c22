package e2e

// The operator's console in a real browser: Debian's chromium, headless,
// driven by chromedp, against the built binary with ui.enabled. With
// -console.screenshots the test writes the pages' screenshots into docs/
// (linked from the README).

import (
	"context"
	"flag"
	"fmt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/daemontest"
	"github.com/coordd/coordd/internal/redistest"
)

var screenshots = flag.Bool("console.screenshots", false, "write the console's screenshots (console-*.png) into the docs folder")

// browserStep bounds each step in the browser.
const browserStep = 10 * time.Second

// chromium finds Debian's chromium: missing, the test fails in CI
// (scripts/test.sh installs it) and is skipped elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if redistest.CI() {
		t.Fatal("chromium is not installed (scripts/debian-packages.sh chromium)")
	}
	t.Skip("chromium is not installed: apt-get install chromium")
	return ""
}

// browser is a headless chromium, ended when the test ends.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in CI containers
		chromedp.DisableGPU,
		chromedp.WindowSize(1100, 720),
		chromedp.UserDataDir(t.TempDir()),
	)
	all, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(all)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser
		cancel()
		cancelAlloc() // and kills it if it still runs
	})
	// The first call starts the browser, which lives as long as its
	// context: that one has no timeout of its own.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1100, 720)); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

// run runs actions, within browserStep.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// eval returns the value of a JavaScript expression.
func (b *browser) eval(expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`String(`+expr+`)`))
	if err != nil {
		b.t.Fatalf("browser: evaluate %s: %v", expr, err)
	}
	return s
}

// waitFor polls a JavaScript expression until it is want, within
// browserStep.
func (b *browser) waitFor(what, expr, want string) {
	b.t.Helper()
	b.waitWithin(browserStep, what, expr, want)
}

// activityFlush is how long a queue's counts take to reach the console:
// an instance adds them to the store every 10 s, and the page refreshes
// every 2 s.
const activityFlush = 15 * time.Second

// waitWithin is waitFor within d.
func (b *browser) waitWithin(d time.Duration, what, expr, want string) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	var got string
	for time.Now().Before(deadline) {
		if got = b.eval(`(() => { try { return ` + expr + `; } catch (e) { return 'error: ' + e; } })()`); got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("browser: %s: %s is %q, want %q; page error %q", what, expr, got, want, b.eval(`document.getElementById('error').textContent`))
}

// cell is the expression of a queue's count in the queues table.
func cell(queue, class string) string {
	return fmt.Sprintf(`document.querySelector('tr[data-queue="%s"] td.%s')?.textContent`, queue, class)
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	if !*screenshots {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("browser: screenshot: %v", err)
	}
	if err := os.WriteFile("../docs/"+name, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// consolePolicies are the rate-limit policies the console shows.
const consolePolicies = `ratelimit:
  policies:
    - name: api
      algorithm: token_bucket
      limit: 20
      period: 1s
      fail_open: true
    - name: login
      limits:
        - {name: per-minute, algorithm: sliding_window, limit: 5, period: 1m}
        - {name: per-day, algorithm: fixed_window, limit: 50, period: 24h}
    - name: exports
      algorithm: leaky_bucket
      limit: 10
      period: 1m
      shadow: true
`

// TestConsole: with auth off, on the Redis Cluster: a queue's counts change
// after an Enqueue; a dead letter redriven is back in ready; a queue
// paused and resumed from the page stops and restarts claims; caps,
// schedules, the last hour's chart, and a queue only another instance
// served are shown; a held lock
// shows its holder and fence, and no token anywhere on the page; the
// rate-limit policies and a peek; this instance's streams and nodes.
func TestConsole(t *testing.T) {
	b := newBrowser(t)
	addrs := redistest.Cluster(t)
	prefix := "e2e-" + randomHex(t, 8)
	in := startCoorddWith(t, daemontest.Options{
		Name: "console", Args: []string{"--store", "redis"}, Config: consolePolicies,
		Env: []string{
			"COORDD_REDIS_ADDRS=" + strings.Join(addrs, ","), "COORDD_REDIS_MODE=cluster",
			"COORDD_REDIS_KEY_PREFIX=" + prefix, "COORDD_UI_ENABLED=true",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueue := func(q string, attempts int32) {
		t.Helper()
		if _, err := in.queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: q, Payload: []byte(`{"to":"ops@example.com"}`), MaxAttempts: attempts}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("emails", 0)
	// Three dead letters in "invoices".
	for range 3 {
		enqueue("invoices", 1)
	}
	c, err := in.queues.Claim(ctx, &coordv1.ClaimRequest{Queue: "invoices", MaxMessages: 3, VisibilityTimeout: durationpb.New(time.Minute)})
	if err != nil || len(c.GetMessages()) != 3 {
		t.Fatalf("Claim = %v, %v", c, err)
	}
	for _, m := range c.GetMessages() {
		if _, err := in.queues.Nack(ctx, &coordv1.NackRequest{Queue: "invoices", Receipt: m.GetReceipt()}); err != nil {
			t.Fatal(err)
		}
	}

	url := "http://" + in.HTTPAddr + "/ui/"
	b.run("open the console", chromedp.Navigate(url))
	b.waitFor("emails listed", cell("emails", "ready"), "1")
	enqueue("emails", 0)
	b.waitFor("the count follows an Enqueue", cell("emails", "ready"), "2")

	counts := cell("invoices", "ready") + `+'/'+` + cell("invoices", "dead")
	b.waitFor("invoices' dead letters", counts, "0/3")
	b.run("open invoices' dead letters", chromedp.Click(chromedp.CSS(`tr[data-queue="invoices"] button.show-dead`)))
	b.waitFor("the dead letters listed", `document.querySelectorAll('#dl-table tbody tr').length`, "3")
	b.waitFor("their payload", `document.querySelector('#dl-table tbody td:nth-child(3)').textContent`, `{"to":"ops@example.com"}`)
	b.run("redrive one", chromedp.Click(chromedp.CSS(`#dl-table tbody input[type=checkbox]`)), chromedp.Click(chromedp.CSS(`#redrive-selected`)))
	b.waitFor("one redriven", `document.getElementById('dead-result').textContent`, "Moved 1 back to ready.")
	b.waitFor("back in ready", counts, "1/2")
	b.run("redrive all", chromedp.Click(chromedp.CSS(`#redrive-all`)))
	b.waitFor("all redriven", `document.getElementById('dead-result').textContent`, "Moved 2 back to ready.")
	b.waitFor("all back in ready", counts, "3/0")

	// Pause and resume from the page: claims stop, then go on.
	b.run("pause invoices", chromedp.Click(chromedp.CSS(`tr[data-queue="invoices"] button.pause`)))
	b.waitFor("invoices paused", `document.querySelector('tr[data-queue="invoices"] td.state')?.textContent`, "paused")
	if c, err := in.queues.Claim(ctx, &coordv1.ClaimRequest{Queue: "invoices"}); err != nil || len(c.GetMessages()) != 0 {
		t.Fatalf("Claim of the paused queue = %v, %v; want nothing", c, err)
	}
	b.run("resume invoices", chromedp.Click(chromedp.CSS(`tr[data-queue="invoices"] button.pause`)))
	b.waitFor("invoices active", `document.querySelector('tr[data-queue="invoices"] td.state')?.textContent`, "active")
	if c, err := in.queues.Claim(ctx, &coordv1.ClaimRequest{Queue: "invoices"}); err != nil || len(c.GetMessages()) != 1 {
		t.Fatalf("Claim after the resume = %v, %v; want a message", c, err)
	}
	// Caps and schedules as configured.
	if _, err := in.queues.ConfigureQueue(ctx, &coordv1.ConfigureQueueRequest{Queue: "emails", MaxInFlight: 5,
		ClaimRate: &coordv1.ClaimRate{Limit: 10, Period: durationpb.New(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.queues.PutSchedule(ctx, &coordv1.PutScheduleRequest{Queue: "reports", Name: "nightly", Spec: "0 3 * * *", TimeZone: "Europe/Paris"}); err != nil {
		t.Fatal(err)
	}
	b.waitFor("emails' caps", `document.querySelector('tr[data-queue="emails"] td.caps')?.textContent`, "at most 5 in flight, 10/1s claims")
	b.waitFor("reports' schedule", `document.querySelector('tr[data-queue="reports"] td.schedules')?.textContent`, "nightly: 0 3 * * * (Europe/Paris)")
	// The last hour's chart, from the counts every instance adds up every
	// 10 s; and a queue only another instance served.
	other := startInstance(t, "other", addrs, prefix)
	if _, err := other.queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "from-other", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	b.waitWithin(activityFlush, "a queue another instance served", cell("from-other", "ready"), "1")
	b.waitWithin(activityFlush, "invoices' chart", `document.querySelector('tr[data-queue="invoices"] svg.chart title')?.textContent`,
		"last hour: 3 enqueued, 0 acked, 0 retried, 3 dead")
	b.screenshot("console-queues.png")

	// A held lock: holder and fence, never its token.
	g, err := in.locks.Lock(ctx, &coordv1.LockRequest{Name: "orders-db", Ttl: durationpb.New(time.Minute), Owner: "worker-7"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock = %v, %v", g, err)
	}
	b.run("look up the lock",
		chromedp.Click(chromedp.CSS(`#tabs button[data-tab="locks"]`)),
		chromedp.SendKeys(chromedp.CSS(`#lock-name`), "orders-db"),
		chromedp.Click(chromedp.CSS(`#lock-go`)))
	b.waitFor("the holder", `document.querySelector('#lock-result td.owner')?.textContent`, "worker-7")
	b.waitFor("the fence", `document.querySelector('#lock-result td.fence')?.textContent`, fmt.Sprint(g.GetFence()))
	if html := b.eval(`document.documentElement.outerHTML`); strings.Contains(html, g.GetToken()) {
		t.Errorf("the lock's token is on the page")
	}
	b.screenshot("console-locks.png")

	b.run("rate limits", chromedp.Click(chromedp.CSS(`#tabs button[data-tab="ratelimits"]`)))
	b.waitFor("the policies", `document.querySelector('#policies-table tbody tr td')?.textContent`, "api")
	b.run("peek", chromedp.SendKeys(chromedp.CSS(`#peek-key`), "customer-42"), chromedp.Click(chromedp.CSS(`#peek-go`)))
	b.waitFor("the peek", `document.querySelector('#peek-result p')?.textContent.startsWith('Would be allowed, leaving 19 of 20')`, "true")
	// A runtime policy put from the page: listed apart from the config's,
	// enforced, then deleted from the page.
	b.run("put a runtime policy",
		chromedp.SendKeys(chromedp.CSS(`#put-policy-name`), "tenant-42"),
		chromedp.SetValue(chromedp.CSS(`#put-policy-algorithm`), "fixed_window"),
		chromedp.SendKeys(chromedp.CSS(`#put-policy-limit`), "2"),
		chromedp.SendKeys(chromedp.CSS(`#put-policy-period`), "1m"),
		chromedp.SetValue(chromedp.CSS(`#put-policy-on-failure`), "local"),
		chromedp.Click(chromedp.CSS(`#put-policy-go`)))
	b.waitFor("the runtime policy", `document.querySelector('#runtime-policies-table tbody tr td')?.textContent`, "tenant-42")
	b.waitFor("apart from the config's", `[...document.querySelectorAll('#policies-table tbody td:first-child')].some(td => td.textContent === 'tenant-42')`, "false")
	b.waitFor("its on_store_failure", `document.querySelector('#runtime-policies-table tbody tr td:nth-child(4)')?.textContent`, "local")
	for i, want := range []bool{true, true, false} {
		r, err := coordv1.NewRateLimitServiceClient(in.conn).Allow(ctx, &coordv1.AllowRequest{Key: "k", Policy: "tenant-42"})
		if err != nil || r.GetAllowed() != want {
			t.Fatalf("Allow %d under the page's runtime policy = %v, %v; want allowed %v", i+1, r, err, want)
		}
	}
	b.screenshot("console-ratelimits.png")
	b.eval(`window.confirm = () => true`) // the page asks before it deletes
	b.run("delete it", chromedp.Click(chromedp.CSS(`#runtime-policies-table button.delete-policy`)))
	b.waitFor("no runtime policy", `document.querySelector('#runtime-policies-table tbody td')?.textContent`, "No runtime policy.")
	if _, err := coordv1.NewRateLimitServiceClient(in.conn).Allow(ctx, &coordv1.AllowRequest{Key: "k", Policy: "tenant-42"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Allow under the deleted policy: %v, want INVALID_ARGUMENT", err)
	}

	k, _ := openSession(t, ctx, in, "")
	defer k.cancel()
	b.run("health", chromedp.Click(chromedp.CSS(`#tabs button[data-tab="health"]`)))
	b.waitFor("the nodes", `document.querySelectorAll('#nodes-table tr.node').length`, "6")
	b.waitFor("all reachable", `[...document.querySelectorAll('#nodes-table tr.node td:nth-child(3)')].every(td => td.textContent === 'yes')`, "true")
	b.waitFor("the session's stream", `document.querySelector('#streams-table tbody td:nth-child(2)')?.textContent`, "1")
	b.screenshot("console-health.png")
}

// TestConsoleRedlock: against coordd in Redlock mode (three redis-server
// masters of the test's own) the page says it serves locks only, opens on
// the locks, shows a held lock's holder and fence, shows semaphores,
// queues and rate limits as not served in Redlock mode (never an error),
// and lists the masters.
func TestConsoleRedlock(t *testing.T) {
	b := newBrowser(t)
	var addrs []string
	for range 3 {
		addrs = append(addrs, redistest.StartStandalone(t).Addr())
	}
	in := startCoordd(t, "console-redlock", []string{"--store", "redis"}, "COORDD_REDIS_MODE=redlock",
		"COORDD_REDIS_ADDRS="+strings.Join(addrs, ","), "COORDD_UI_ENABLED=true")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := in.locks.Lock(ctx, &coordv1.LockRequest{Name: "orders-db", Ttl: durationpb.New(time.Minute), Owner: "worker-7"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock = %v, %v", g, err)
	}
	noError := func(when string) {
		t.Helper()
		if e := b.eval(`document.getElementById('error').textContent`); e != "" {
			t.Errorf("%s: the page shows the error %q", when, e)
		}
	}

	b.run("open the console", chromedp.Navigate("http://"+in.HTTPAddr+"/ui/"))
	b.waitFor("the mode", `document.getElementById('mode').hidden ? '' : document.getElementById('mode').textContent`, "Redlock mode: locks only")
	b.waitFor("the locks tab first", `document.getElementById('locks').hidden`, "false")
	b.run("look up the lock", chromedp.SendKeys(chromedp.CSS(`#lock-name`), "orders-db"), chromedp.Click(chromedp.CSS(`#lock-go`)))
	b.waitFor("the holder", `document.querySelector('#lock-result td.owner')?.textContent`, "worker-7")
	b.waitFor("the fence", `document.querySelector('#lock-result td.fence')?.textContent`, fmt.Sprint(g.GetFence()))
	// The page disables the kinds it knows are not served: the script picks one.
	b.run("look up a semaphore", chromedp.Evaluate[chromedp.Void](`(() => {
		const k = document.getElementById('lock-kind'); k.options[1].disabled = false; k.value = 'semaphore'; })()`),
		chromedp.Click(chromedp.CSS(`#lock-go`)))
	b.waitFor("semaphores not served", `document.querySelector('#lock-result .not-served')?.textContent`,
		"Semaphores: not served in Redlock mode (this coordd serves exclusive locks only).")
	noError("a semaphore looked up")

	for _, tab := range []string{"queues", "ratelimits"} {
		b.run(tab, chromedp.Click(chromedp.CSS(`#tabs button[data-tab="`+tab+`"]`)))
		b.waitFor(tab+" not served", `document.querySelector('#`+tab+` .not-served').hidden`, "false")
		b.waitFor(tab+"' content hidden", `[...document.querySelectorAll('#`+tab+` > :not(h2):not(.not-served)')].every(e => e.hidden)`, "true")
		time.Sleep(2500 * time.Millisecond) // past a refresh, were there one
		noError(tab)
	}
	b.run("health", chromedp.Click(chromedp.CSS(`#tabs button[data-tab="health"]`)))
	b.waitFor("the masters", `document.querySelectorAll('#nodes-table tr.node').length`, "3")
	b.waitFor("all reachable", `[...document.querySelectorAll('#nodes-table tr.node td:nth-child(3)')].every(td => td.textContent === 'yes')`, "true")
	b.waitFor("sessions not served", `document.getElementById('sessions-note').hidden`, "false")
	noError("health")
}

// TestConsoleAuth: with auth on, a key sees its own namespace's queue and
// not the other's; a wrong key gets the login form back.
func TestConsoleAuth(t *testing.T) {
	b := newBrowser(t)
	const keyA, keyB = "console-key-of-team-a-0001", "console-key-of-team-b-0002"
	in := startCoordd(t, "console-auth", []string{"--store", "memory"}, "COORDD_UI_ENABLED=true",
		"COORDD_AUTH_ENABLED=true", "COORDD_AUTH_API_KEYS_FILE="+writeKeys(t, map[string]string{"team-a": keyA, "team-b": keyB}))
	for key, q := range map[string]string{keyA: "a-orders", keyB: "b-orders"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
		if _, err := in.queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: q, Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	login := func(key string) {
		t.Helper()
		b.waitFor("the login form", `document.getElementById('login').hidden`, "false")
		b.run("log in", chromedp.SendKeys(chromedp.CSS(`#key`), key), chromedp.Click(chromedp.CSS(`#login-btn`)))
	}
	queues := `[...document.querySelectorAll('#queues-table tr[data-queue]')].map(r => r.dataset.queue).join(',')`

	b.run("open the console", chromedp.Navigate("http://"+in.HTTPAddr+"/ui/"))
	login(keyA)
	b.waitFor("team-a's namespace", `document.getElementById('who').textContent`, "namespace team-a")
	b.waitFor("team-a's queue only", queues, "a-orders")

	b.run("forget the key", chromedp.Click(chromedp.CSS(`#logout`)))
	login("not-a-key-of-anyone-0000")
	b.waitFor("refused", `document.getElementById('login-error').textContent`, "unknown API key")
	if got := b.eval(`document.getElementById('queues').hidden`); got != "true" {
		t.Errorf("a wrong key sees the queues")
	}
	login(keyB)
	b.waitFor("team-b's queue only", queues, "b-orders")
}

// writeKeys writes an auth.api_keys_file of namespace -> key.
func writeKeys(t *testing.T, keys map[string]string) string {
	t.Helper()
	var b strings.Builder
	for ns, k := range keys {
		fmt.Fprintf(&b, "- namespace: %s\n  key: %s\n", ns, k)
	}
	path := t.TempDir() + "/keys.yaml"
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
