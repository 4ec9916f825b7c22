package deploy

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// chartDir is coordd's Helm chart.
const chartDir = "helm/coordd"

// The release the tests render: helm install coordd deploy/helm/coordd
// --namespace coordd.
const helmRelease, helmNamespace = "coordd", "coordd"

// helmKube is the Kubernetes version the tests render for: the stated
// minimum (TestHelmChart checks that it is).
var helmKube = chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}

// renderChart renders the chart in dir with values over its values.yaml,
// as helm install --dry-run would, with Helm's own loader, values
// (coalescing and values.schema.json), engine (strict: a template that
// names a value the values lack is an error) and kubeVersion check. It
// returns the objects and the rendered NOTES.txt.
func renderChart(dir string, values map[string]any) (objs []object, notes string, err error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, "", err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = helmKube
	if c := ch.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, caps.KubeVersion.String()) {
		return nil, "", fmt.Errorf("chart requires kubeVersion %s, which %s does not meet", c, caps.KubeVersion.String())
	}
	opts := chartutil.ReleaseOptions{Name: helmRelease, Namespace: helmNamespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, caps)
	if err != nil {
		return nil, "", err
	}
	out, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return nil, "", err
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch base := path.Base(n); {
		case base == "NOTES.txt":
			notes = out[n]
			continue
		case strings.HasPrefix(base, "_"):
			continue
		}
		docs, err := parseDocs(n, []byte(out[n]))
		if err != nil {
			return nil, "", err
		}
		for _, d := range docs {
			o, ok := d.(object)
			if !ok {
				return nil, "", fmt.Errorf("%s: a document that is not an object", n)
			}
			objs = append(objs, o)
		}
	}
	return objs, notes, nil
}

// helmCase is one set of values the tests render the chart with.
type helmCase struct {
	name   string
	file   string         // a values file of the chart's (-f), or ""
	set    map[string]any // values over it (--set)
	mode   string
	kinds  []string
	expect func(t *testing.T, objs []object, cfg map[string]any)
}

// values are the case's values: its file's, with set over them.
func (hc helmCase) values(t *testing.T) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if hc.file != "" {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, hc.file))
		if err != nil {
			t.Fatal(err)
		}
		vals = v
	}
	return chartutil.CoalesceTables(chartutil.CoalesceTables(map[string]any{}, hc.set), vals)
}

// render renders the chart with the case's values.
func (hc helmCase) render(t *testing.T) []object {
	t.Helper()
	objs, _, err := renderChart(chartDir, hc.values(t))
	if err != nil {
		t.Fatalf("helm %s: %v", hc.name, err)
	}
	return objs
}

// coorddEnv is the value of the coordd container's variable n, "" if unset.
func coorddEnv(t *testing.T, objs []object, n string) string {
	t.Helper()
	env, _ := containerEnv(t, container(t, one(t, objs, "Deployment"), "coordd"))
	return env[n]
}

var helmCases = []helmCase{
	{
		name: "shared", mode: "shared",
		kinds: []string{"ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service"},
		expect: func(t *testing.T, objs []object, cfg map[string]any) {
			if n, _ := getInt(one(t, objs, "Deployment"), "spec", "replicas"); n != 3 {
				t.Errorf("replicas %d, want 3", n)
			}
			if getString(cfg, "redis", "mode") != "cluster" || len(getList(cfg, "redis", "addrs")) != 3 {
				t.Errorf("config: redis %v, want mode cluster and 3 addrs", get(cfg, "redis"))
			}
			if getString(cfg, "auth", "api_keys_file") != "/etc/coordd-auth/api-keys.yaml" {
				t.Errorf("config: auth.api_keys_file %q, want the Secret coordd's api-keys.yaml", getString(cfg, "auth", "api_keys_file"))
			}
			if n, _ := getInt(cfg, "ratelimit", "expected_instances"); n != 3 {
				t.Errorf("config: ratelimit.expected_instances %d, want 3 (the replicas)", n)
			}
			if coorddEnv(t, objs, "COORDD_REDIS_PASSWORD") != "from-a-secret" {
				t.Error("coordd: COORDD_REDIS_PASSWORD does not come from a Secret")
			}
		},
	},
	{
		name: "shared-tls", file: "ci/shared-tls-values.yaml", mode: "shared",
		kinds: []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceMonitor"},
		expect: func(t *testing.T, objs []object, cfg map[string]any) {
			want := map[string]any{
				"cert_file": "/etc/coordd-tls/tls.crt", "key_file": "/etc/coordd-tls/tls.key",
				"client_ca_file": "/etc/coordd-tls/ca.crt", "client_auth": "verify_if_given",
			}
			if got := getMap(cfg, "tls"); !reflect.DeepEqual(got, want) {
				t.Errorf("config: tls %v, want %v", got, want)
			}
			if n, _ := getInt(cfg, "ratelimit", "expected_instances"); n != 8 {
				t.Errorf("config: ratelimit.expected_instances %d, want 8 (the autoscaler's maximum)", n)
			}
			if len(getList(cfg, "ratelimit", "policies")) != 1 || getString(cfg, "redis", "timeout") != "500ms" || getString(cfg, "redis", "mode") != "standalone" {
				t.Errorf("config: %v: config's keys not merged over the chart's", cfg)
			}
			if len(getList(cfg, "auth", "api_keys")) != 1 || len(getList(cfg, "auth", "mtls")) != 1 || getString(cfg, "auth", "api_keys_file") == "" {
				t.Errorf("config: auth %v, want a key, an identity and a file", get(cfg, "auth"))
			}
			c := container(t, one(t, objs, "Deployment"), "coordd")
			if img := getString(c, "image"); img != "registry.example.com/coordd:v0.1.0" {
				t.Errorf("coordd: image %s", img)
			}
			if coorddEnv(t, objs, "OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
				t.Error("coordd: extraEnv not set")
			}
			for _, p := range getList(one(t, objs, "Service"), "spec", "ports") {
				if getString(p, "name") == "grpc" && getString(p, "appProtocol") == "kubernetes.io/h2c" {
					t.Error("Service: gRPC with TLS marked kubernetes.io/h2c (cleartext)")
				}
			}
			if l := stringMap(get(one(t, objs, "ServiceMonitor"), "metadata", "labels")); l["release"] != "kube-prometheus" {
				t.Errorf("ServiceMonitor labels %v, want release: kube-prometheus", l)
			}
		},
	},
	{
		name: "shared-plain", file: "ci/shared-plain-values.yaml", mode: "shared",
		kinds: []string{"ConfigMap", "Deployment", "Service"},
		expect: func(t *testing.T, objs []object, cfg map[string]any) {
			if coorddEnv(t, objs, "COORDD_REDIS_PASSWORD") != "" || get(cfg, "auth", "api_keys_file") != nil {
				t.Error("a Secret read, with redis.existingSecret and auth.existingSecret empty")
			}
			if len(getList(one(t, objs, "Deployment"), "spec", "template", "spec", "volumes")) != 1 {
				t.Error("volumes besides the ConfigMap's")
			}
		},
	},
	{
		name: "sidecar", set: map[string]any{"mode": "sidecar"}, mode: "sidecar",
		kinds: []string{"ConfigMap", "Deployment"},
		expect: func(t *testing.T, objs []object, cfg map[string]any) {
			if cfg["store"] != "memory" || cfg["redis"] != nil || cfg["auth"] != nil {
				t.Errorf("config: %v, want store memory and no redis or auth section", cfg)
			}
		},
	},
	{
		name: "sidecar-podmonitor", file: "ci/sidecar-values.yaml", mode: "sidecar",
		kinds: []string{"ConfigMap", "Deployment", "PodMonitor"},
		expect: func(t *testing.T, objs []object, cfg map[string]any) {
			if cfg["store"] != "memory" || len(getList(cfg, "ratelimit", "policies")) != 1 {
				t.Errorf("config: %v", cfg)
			}
		},
	},
	{
		name: "sidecar-redis", file: "ci/sidecar-redis-values.yaml", mode: "sidecar",
		kinds: []string{"ConfigMap", "Deployment"},
		expect: func(t *testing.T, objs []object, cfg map[string]any) {
			if cfg["store"] != "redis" || getString(cfg, "redis", "mode") != "sentinel" || getString(cfg, "redis", "master_name") != "mymaster" {
				t.Errorf("config: %v, want store redis, sentinel mymaster", cfg)
			}
			if coorddEnv(t, objs, "COORDD_REDIS_PASSWORD") != "from-a-secret" {
				t.Error("coordd: COORDD_REDIS_PASSWORD does not come from a Secret")
			}
			if n, _ := getInt(cfg, "ratelimit", "expected_instances"); n != 3 {
				t.Errorf("config: ratelimit.expected_instances %d, want 3 (the application's replicas)", n)
			}
			dep := one(t, objs, "Deployment")
			if name(dep) != "billing-worker" {
				t.Errorf("Deployment %s, want billing-worker", name(dep))
			}
			env, _ := containerEnv(t, container(t, dep, "worker"))
			if env["QUEUE"] != "invoices" || env["COORDD_ADDR"] != "127.0.0.1:7070" {
				t.Errorf("worker: env %v: its own variables and COORDD_ADDR", env)
			}
		},
	},
}

// helmCaseNamed returns the case of helmCases named n.
func helmCaseNamed(n string) helmCase {
	i := slices.IndexFunc(helmCases, func(hc helmCase) bool { return hc.name == n })
	if i < 0 {
		panic("no helm case " + n)
	}
	return helmCases[i]
}

// TestHelmChart renders the chart with Helm's own engine, in both modes
// with several sets of values (the defaults, every file of ci/), and
// checks each render with the rules the kustomize overlays pass
// (rules_test.go: objects, references, probes, limits, securityContext,
// grace period, GOMEMLIMIT, NetworkPolicy, Kubernetes features), then
// what each set of values asks for.
func TestHelmChart(t *testing.T) {
	stated := minimumKubeVersion(t)
	if v := (kubeVersion{atoi(helmKube.Major), atoi(helmKube.Minor)}); v != stated {
		t.Errorf("the tests render for Kubernetes %v, but the stated minimum is %v", v, stated)
	}
	chart := readDoc(t, filepath.Join(chartDir, "Chart.yaml"))
	if want := fmt.Sprintf(">=%v.0-0", stated); chart["kubeVersion"] != want {
		t.Errorf("Chart.yaml: kubeVersion %v, want %q", chart["kubeVersion"], want)
	}
	if l := getString(chart, "annotations", "artifacthub.io/license"); l != "Apache-2.0" {
		t.Errorf("Chart.yaml: licence annotation %q, want Apache-2.0", l)
	}
	used := map[string]bool{}
	for _, hc := range helmCases {
		used[hc.file] = true
		t.Run(hc.name, func(t *testing.T) {
			objs, notes, err := renderChart(chartDir, hc.values(t))
			if err != nil {
				t.Fatal(err)
			}
			where := "helm " + hc.name
			switch hc.mode {
			case "shared":
				checkShared(t, where, objs)
			case "sidecar":
				checkSidecar(t, where, objs)
			}
			if checkGoMemLimit(t, where, objs) == 0 {
				t.Error("no coordd container with a memory limit")
			}
			if len(ofKind(objs, "NetworkPolicy")) > 0 {
				checkNetworkPolicy(t, where, objs)
			}
			checkKubeFeatures(t, where, objs, stated)
			if got := kinds(objs); !slices.Equal(got, hc.kinds) {
				t.Errorf("kinds %v, want %v", got, hc.kinds)
			}
			dep := one(t, objs, "Deployment")
			if !strings.Contains(notes, "rollout status deployment/"+name(dep)) {
				t.Errorf("NOTES.txt does not name the Deployment %s:\n%s", name(dep), notes)
			}
			hc.expect(t, objs, coorddConfig(t, objs, dep))
		})
	}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if rel, _ := filepath.Rel(chartDir, f); !used[filepath.ToSlash(rel)] {
			t.Errorf("%s: no case of TestHelmChart renders it", f)
		}
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// TestHelmMirrorsOverlays: the chart's coordd container is the kustomize
// overlays' in each mode (command, ports, probes, preStop, resources,
// securityContext, environment), in a pod with the same grace period, and
// coordd.yaml has the same addresses, store and shutdown settings.
func TestHelmMirrorsOverlays(t *testing.T) {
	for _, m := range []struct {
		dir string
		hc  helmCase
	}{
		{sharedDir, helmCaseNamed("shared")},
		{sidecarDir, helmCaseNamed("sidecar-podmonitor")},
	} {
		kobjs, hobjs := build(t, m.dir), m.hc.render(t)
		kdep, hdep := one(t, kobjs, "Deployment"), one(t, hobjs, "Deployment")
		kc, hc := container(t, kdep, "coordd"), container(t, hdep, "coordd")
		for _, f := range []string{"command", "ports", "readinessProbe", "livenessProbe", "startupProbe", "lifecycle", "resources", "securityContext", "env", "restartPolicy"} {
			k, h := kc[f], hc[f]
			if f == "ports" || f == "env" { // order aside (checkGoMemLimit checks that GOMEMLIMIT's comes after its variable)
				k, h = byName(getList(kc, f)), byName(getList(hc, f))
			}
			if !reflect.DeepEqual(k, h) {
				t.Errorf("%s and helm %s: coordd's %s differ:\nkustomize: %v\nhelm:      %v", m.dir, m.hc.name, f, k, h)
			}
		}
		for _, f := range []string{"terminationGracePeriodSeconds", "automountServiceAccountToken"} {
			if k, h := get(kdep, "spec", "template", "spec", f), get(hdep, "spec", "template", "spec", f); !reflect.DeepEqual(k, h) {
				t.Errorf("%s and helm %s: the pod's %s differ: %v, %v", m.dir, m.hc.name, f, k, h)
			}
		}
		kcfg, hcfg := coorddConfig(t, kobjs, kdep), coorddConfig(t, hobjs, hdep)
		for _, k := range []string{"store", "grpc_addr", "http_addr", "log_format", "shutdown_timeout"} {
			if kcfg[k] != hcfg[k] {
				t.Errorf("%s and helm %s: coordd.yaml's %s differ: %v, %v", m.dir, m.hc.name, k, kcfg[k], hcfg[k])
			}
		}
	}
}

// byName sorts a list of named entries (ports, env) by name.
func byName(l []any) []any {
	l = slices.Clone(l)
	sort.Slice(l, func(i, j int) bool { return getString(l[i], "name") < getString(l[j], "name") })
	return l
}

// TestHelmLint runs Helm's own linter (helm lint --kube-version) on the
// chart with each case's values: Chart.yaml, values against the schema,
// templates rendered and their objects' names and selectors.
func TestHelmLint(t *testing.T) {
	for _, hc := range helmCases {
		l := lint.AllWithKubeVersion(chartDir, hc.values(t), helmNamespace, &helmKube)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint %s: %v", hc.name, m)
			}
		}
	}
}

// TestHelmChartRefuses: values that would deploy something broken, or put
// a secret in the ConfigMap, fail the render with a message that names
// the value.
func TestHelmChartRefuses(t *testing.T) {
	for _, c := range []struct {
		what   string
		values map[string]any
		want   string
	}{
		{"a mode that does not exist", map[string]any{"mode": "shard"}, "mode"},
		{"a shared service of 3 replicas on the memory store", map[string]any{"store": "memory"}, "store memory"},
		{"Redis's password in the configuration", map[string]any{"config": map[string]any{"redis": map[string]any{"password": "hunter2"}}}, "config.redis.password"},
		{"a plain API key", map[string]any{"auth": map[string]any{"apiKeys": []any{map[string]any{"namespace": "billing", "key": "0123456789abcdef0123"}}}}, "auth.apiKeys"},
		{"store redis without addresses", map[string]any{"redis": map[string]any{"addrs": []any{}}}, "redis.addrs"},
		{"an unknown value", map[string]any{"replicas": 3}, "replicas"},
		{"a Redis mode that does not exist", map[string]any{"redis": map[string]any{"mode": "clustr"}}, "mode"},
	} {
		_, _, err := renderChart(chartDir, c.values)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v: got %v, want an error naming %s", c.what, c.values, err, c.want)
		}
	}
}

// dropBlock removes from a YAML text (or a template of one) the first
// line that starts with key, after indentation, and the lines indented
// deeper that follow it.
func dropBlock(text, key string) string {
	lines := strings.Split(text, "\n")
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), key) {
			continue
		}
		j := i + 1
		for j < len(lines) && indent(lines[j]) > indent(l) {
			j++
		}
		return strings.Join(append(lines[:i:i], lines[j:]...), "\n")
	}
	return text
}

// TestRulesCatchADroppedProbe: the rules that pass the overlays and the
// chart fail a rendering without one of coordd's probes: each overlay and
// mode of the chart with a probe deleted from its rendered manifest, and a
// copy of the chart whose template has lost its liveness probe.
func TestRulesCatchADroppedProbe(t *testing.T) {
	shared := []string{"readinessProbe", "livenessProbe"}
	sidecar := append(slices.Clip(shared), "startupProbe")
	for _, s := range []struct {
		name   string
		render func(t *testing.T) []object
		rules  func(checker, string, []object)
		probes []string
	}{
		{"kustomize " + sharedDir, func(t *testing.T) []object { return build(t, sharedDir) }, checkShared, shared},
		{"kustomize " + sidecarDir, func(t *testing.T) []object { return build(t, sidecarDir) }, checkSidecar, sidecar},
		{"helm shared", helmCaseNamed("shared").render, checkShared, shared},
		{"helm sidecar", helmCaseNamed("sidecar").render, checkSidecar, sidecar},
	} {
		objs := s.render(t)
		if errs := record(func(c checker) { s.rules(c, s.name, objs) }); len(errs) > 0 {
			t.Fatalf("%s fails the rules as it is: %v", s.name, errs)
		}
		for _, probe := range s.probes {
			objs := s.render(t)
			delete(container(t, one(t, objs, "Deployment"), "coordd"), probe)
			errs := record(func(c checker) { s.rules(c, s.name, objs) })
			if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, probe) }) {
				t.Errorf("%s without coordd's %s: the rules report nothing of it (%v)", s.name, probe, errs)
			} else {
				t.Logf("%s without coordd's %s: %v", s.name, probe, errs)
			}
		}
	}

	dir := filepath.Join(t.TempDir(), "coordd")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	tpl := filepath.Join(dir, "templates", "_helpers.tpl")
	data, err := os.ReadFile(tpl)
	if err != nil {
		t.Fatal(err)
	}
	dropped := dropBlock(string(data), "livenessProbe:")
	if dropped == string(data) {
		t.Fatal("the chart's templates/_helpers.tpl has no livenessProbe block")
	}
	if err := os.WriteFile(tpl, []byte(dropped), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, _, err := renderChart(dir, nil)
	if err != nil {
		t.Fatalf("the chart without its liveness probe: %v", err)
	}
	errs := record(func(c checker) { checkShared(c, "a chart without livenessProbe", objs) })
	if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "livenessProbe") }) {
		t.Errorf("a chart whose template drops livenessProbe passes the rules (%v)", errs)
	} else {
		t.Logf("a chart whose template drops livenessProbe: %v", errs)
	}
}
