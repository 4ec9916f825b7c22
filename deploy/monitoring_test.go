package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// metricNames are the series coordd exports that the rules and the
// dashboard may name (histograms by their _bucket series), and up.
var metricNames = []string{
	"up",
	"grpc_server_handled_total",
	"grpc_server_handling_seconds_bucket",
	"coordd_grpc_wait_seconds_bucket",
	"coordd_holds_granted_total",
	"coordd_holds_contended_total",
	"coordd_hold_duration_seconds_count",
	"coordd_holds_lost_total",
	"coordd_holds_expired_total",
	"coordd_hold_wait_seconds_bucket",
	"coordd_hold_duration_seconds_bucket",
	"coordd_session_streams",
	"coordd_ratelimit_decisions_total",
	"coordd_idempotency_outcomes_total",
	"coordd_queue_messages",
	"coordd_store_duration_seconds_bucket",
	"coordd_store_errors_total",
	"coordd_store_breaker_open",
	"coordd_redis_eviction_allowed",
	"coordd_redis_evicting_nodes",
}

var promql = parser.NewParser(parser.Options{})

// selectors parses expr and returns the metric names it selects.
func selectors(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
			if !slices.Contains(metricNames, vs.Name) {
				t.Errorf("%s: %q selects %q, which is not a coordd metric this test knows", where, expr, vs.Name)
			}
		}
		return nil
	})
	return names
}

// TestPrometheusConfig: the scrape configuration names its jobs, targets
// and rule files, and every rule file it loads is in deploy/prometheus.
func TestPrometheusConfig(t *testing.T) {
	cfg := readDoc(t, "prometheus/prometheus.yml")
	jobs := map[string]bool{}
	for _, sc := range getList(cfg, "scrape_configs") {
		job := getString(sc, "job_name")
		if job == "" || jobs[job] {
			t.Errorf("a scrape config without a job_name, or a repeated one: %q", job)
		}
		jobs[job] = true
		var targets []string
		for _, c := range getList(sc, "static_configs") {
			targets = append(targets, strs(get(c, "targets"))...)
		}
		if len(targets) == 0 {
			t.Errorf("job %s: no targets", job)
		}
		if p := getString(sc, "metrics_path"); p != "" && p != "/metrics" {
			t.Errorf("job %s: metrics_path %s, coordd serves /metrics", job, p)
		}
	}
	if !jobs["coordd"] {
		t.Error("no job coordd")
	}
	rules := strs(get(cfg, "rule_files"))
	if len(rules) == 0 {
		t.Error("no rule_files")
	}
	for _, r := range rules {
		if _, err := os.Stat(filepath.Join("prometheus", filepath.Base(r))); err != nil {
			t.Errorf("rule_files: %s: %v", r, err)
		}
	}
}

// TestAlertRules: alerts.yml passes Prometheus's own validation (what
// promtool check rules does: PromQL, templates, labels), every rule is an
// alert with for, labels and annotations, and the rules cover what they
// promise.
func TestAlertRules(t *testing.T) {
	const path = "prometheus/alerts.yml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(data, false, model.UTF8Validation, promql, nil)
	for _, err := range errs {
		t.Errorf("%s: %v", path, err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s: no rule groups", path)
	}

	covered := map[string]bool{}
	alerts := map[string]bool{}
	for _, g := range getList(readDoc(t, path), "groups") {
		for _, r := range getList(g, "rules") {
			rule, _ := r.(map[string]any)
			name := getString(rule, "alert")
			if name == "" {
				t.Errorf("group %s: a rule that is not an alert: %v", getString(g, "name"), rule)
				continue
			}
			if alerts[name] {
				t.Errorf("alert %s: twice", name)
			}
			alerts[name] = true
			for _, key := range []string{"expr", "for", "labels", "annotations"} {
				if _, ok := rule[key]; !ok {
					t.Errorf("alert %s: no %s", name, key)
				}
			}
			if getString(rule, "labels", "severity") == "" {
				t.Errorf("alert %s: no severity label", name)
			}
			for _, a := range []string{"summary", "description"} {
				if getString(rule, "annotations", a) == "" {
					t.Errorf("alert %s: no %s annotation", name, a)
				}
			}
			expr := getString(rule, "expr")
			checkLatencyApart(t, "alert "+name, expr, true)
			for _, n := range selectors(t, "alert "+name, expr) {
				covered[n] = true
			}
			if strings.Contains(expr, "coordd_queue_messages") && !strings.Contains(expr, `state="dead"`) {
				t.Errorf("alert %s: queue depth without state=\"dead\"", name)
			}
		}
	}
	checkErrorRateCodes(t, readDoc(t, path))
	for _, m := range []string{
		"coordd_store_errors_total", "coordd_store_breaker_open", "coordd_queue_messages",
		"coordd_hold_wait_seconds_bucket", "grpc_server_handled_total", "coordd_redis_evicting_nodes",
		"grpc_server_handling_seconds_bucket",
	} {
		if !covered[m] {
			t.Errorf("no alert on %s", m)
		}
	}
}

// dashboardVars stand in for the dashboard's variables so that its queries
// parse as PromQL.
var dashboardVars = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$__interval", "1m",
	"$__range", "1h",
	"${datasource}", "prometheus",
	"$job", ".*",
	"$instance", ".*",
)

// TestGrafanaDashboard: the dashboard has panels, each with queries that
// parse, and the panels show what they promise.
func TestGrafanaDashboard(t *testing.T) {
	const path = "grafana/coordd-dashboard.json"
	d := readDoc(t, path)
	if n, _ := getInt(d, "schemaVersion"); n < 36 {
		t.Errorf("schemaVersion %d, want a current one (39)", n)
	}
	if getString(d, "title") == "" || getString(d, "uid") == "" {
		t.Error("no title or uid")
	}
	vars := map[string]bool{}
	for _, v := range getList(d, "templating", "list") {
		vars[getString(v, "name")] = true
	}
	for _, v := range []string{"datasource", "job", "instance"} {
		if !vars[v] {
			t.Errorf("no variable %s", v)
		}
	}

	// Panels, those inside collapsed rows too.
	var panels []any
	for _, p := range getList(d, "panels") {
		panels = append(panels, p)
		panels = append(panels, getList(p, "panels")...)
	}
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	ids := map[int]bool{}
	shown := map[string]bool{}
	var exprs int
	for _, p := range panels {
		title := getString(p, "title")
		id, _ := getInt(p, "id")
		if ids[id] {
			t.Errorf("panel %q: id %d is not unique", title, id)
		}
		ids[id] = true
		x, _ := getInt(p, "gridPos", "x")
		w, _ := getInt(p, "gridPos", "w")
		if h, _ := getInt(p, "gridPos", "h"); w < 1 || h < 1 || x+w > 24 {
			t.Errorf("panel %q: gridPos %v out of the 24-column grid", title, get(p, "gridPos"))
		}
		if getString(p, "type") == "row" {
			continue
		}
		if title == "" {
			t.Errorf("panel %d: no title", id)
		}
		targets := getList(p, "targets")
		if len(targets) == 0 {
			t.Errorf("panel %q: no targets", title)
		}
		for _, tg := range targets {
			expr := getString(tg, "expr")
			if strings.TrimSpace(expr) == "" {
				t.Errorf("panel %q: target %s has no expr", title, getString(tg, "refId"))
				continue
			}
			exprs++
			checkLatencyApart(t, "panel "+title, dashboardVars.Replace(expr), false)
			for _, n := range selectors(t, "panel "+title, dashboardVars.Replace(expr)) {
				shown[n] = true
			}
		}
	}
	for _, m := range metricNames {
		if m != "up" && !shown[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
	if exprs < 15 {
		t.Errorf("only %d queries", exprs)
	}
}

// checkLatencyApart: a query of the latency of calls
// (grpc_server_handling_seconds) selects grpc_type="unary", so that no
// stream is in it (older coordd versions timed streams there), and never
// mixes in coordd_grpc_wait_seconds, the calls that asked to wait, whose
// times are the waits their clients chose; an alert (isAlert) never selects
// the waits at all, for the same reason.
func checkLatencyApart(t *testing.T, where, expr string, isAlert bool) {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return // reported by selectors
	}
	var latency, waits bool
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		switch {
		case strings.HasPrefix(vs.Name, "grpc_server_handling_seconds"):
			latency = true
			unary := false
			for _, m := range vs.LabelMatchers {
				if m.Name == "grpc_type" {
					unary = m.Type == labels.MatchEqual && m.Value == "unary"
				}
			}
			if !unary {
				t.Errorf("%s: %s without grpc_type=\"unary\": streams would be in it", where, vs)
			}
		case strings.HasPrefix(vs.Name, "coordd_grpc_wait_seconds"):
			waits = true
		}
		return nil
	})
	if latency && waits {
		t.Errorf("%s: %q mixes latency and waits, which coordd keeps apart", where, expr)
	}
	if isAlert && waits {
		t.Errorf("%s: alerts on coordd_grpc_wait_seconds, the waits clients chose", where)
	}
}

// alertExpr returns the expression of the alert named name in the rules doc.
func alertExpr(t *testing.T, doc map[string]any, name string) string {
	t.Helper()
	for _, g := range getList(doc, "groups") {
		for _, r := range getList(g, "rules") {
			if getString(r, "alert") == name {
				return getString(r, "expr")
			}
		}
	}
	t.Fatalf("no alert %s", name)
	return ""
}

// checkErrorRateCodes: CoorddGRPCErrorRate counts the codes of coordd's
// faults and none of the codes that describe a client (one bad client must
// not page the operator), and CoorddDown selects the job the monitors set.
func checkErrorRateCodes(t *testing.T, doc map[string]any) {
	t.Helper()
	expr := alertExpr(t, doc, "CoorddGRPCErrorRate")
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Fatal(err)
	}
	counted := func(code string) bool { // by every grpc_code matcher of the numerator's selector
		var first *parser.VectorSelector
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && first == nil {
				first = vs
			}
			return nil
		})
		for _, m := range first.LabelMatchers {
			if m.Name == "grpc_code" && !m.Matches(code) {
				return false
			}
		}
		return true
	}
	for _, code := range []string{"OK", "Canceled", "InvalidArgument", "FailedPrecondition", "NotFound", "Unauthenticated", "PermissionDenied", "ResourceExhausted", "DeadlineExceeded"} {
		if counted(code) {
			t.Errorf("CoorddGRPCErrorRate counts %s, a client's doing", code)
		}
	}
	for _, code := range []string{"Unavailable", "Internal", "Unknown", "DataLoss", "Aborted"} {
		if !counted(code) {
			t.Errorf("CoorddGRPCErrorRate leaves out %s, a fault of coordd or its store", code)
		}
	}
	if down := alertExpr(t, doc, "CoorddDown"); !strings.Contains(down, `job="`+monitorJob+`"`) {
		t.Errorf("CoorddDown = %q, want it on job=%q, the job the monitors set", down, monitorJob)
	}
}
