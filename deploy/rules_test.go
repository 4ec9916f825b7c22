package deploy

// The rules every Kubernetes rendering of coordd must pass, whoever renders
// it: the kustomize overlays (kubernetes_test.go) and the Helm chart
// (helm_test.go) are checked by these same functions. A rule reports to a
// checker: the test's *testing.T, or a recorder in the tests that show a
// rule catches a fault (TestRulesCatchADroppedProbe).

import (
	"fmt"
	"path"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// checker is what a rule reports to; *testing.T is one.
type checker interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// recorder is a checker that keeps what a rule reports.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Fatalf ends the rule, as t.Fatalf ends a test: record runs the rule in a
// goroutine of its own.
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// record runs rule and returns what it reported.
func record(rule func(checker)) []string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rule(r)
	}()
	<-done
	return r.errs
}

// object is one Kubernetes object, decoded.
type object = map[string]any

func kind(o object) string { return getString(o, "kind") }
func name(o object) string { return getString(o, "metadata", "name") }
func id(o object) string   { return kind(o) + "/" + name(o) }

// ofKind returns the objects of kind k.
func ofKind(objs []object, k string) []object {
	var out []object
	for _, o := range objs {
		if kind(o) == k {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of kind k.
func one(t checker, objs []object, k string) object {
	t.Helper()
	l := ofKind(objs, k)
	if len(l) != 1 {
		t.Fatalf("want one %s, got %d", k, len(l))
	}
	return l[0]
}

func kinds(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, kind(o))
	}
	sort.Strings(out)
	return out
}

// podContainers returns the containers of a Deployment's pod that run for
// the pod's life: its containers and its native sidecars (init containers
// with restartPolicy Always).
func podContainers(dep object) []map[string]any {
	var out []map[string]any
	for _, c := range getList(dep, "spec", "template", "spec", "containers") {
		out = append(out, c.(map[string]any))
	}
	for _, c := range getList(dep, "spec", "template", "spec", "initContainers") {
		if getString(c, "restartPolicy") == "Always" {
			out = append(out, c.(map[string]any))
		}
	}
	return out
}

// container returns the container (or sidecar) of dep named n.
func container(t checker, dep object, n string) map[string]any {
	t.Helper()
	for _, c := range podContainers(dep) {
		if getString(c, "name") == n {
			return c
		}
	}
	t.Fatalf("%s: no container %s", id(dep), n)
	return nil
}

// podPorts maps the pod's port names and numbers (as strings) to numbers.
func podPorts(dep object) map[string]int {
	ports := map[string]int{}
	for _, c := range podContainers(dep) {
		for _, p := range getList(c, "ports") {
			n, _ := getInt(p, "containerPort")
			ports[fmt.Sprint(n)] = n
			if s := getString(p, "name"); s != "" {
				ports[s] = n
			}
		}
	}
	return ports
}

func podLabels(dep object) map[string]string {
	return stringMap(get(dep, "spec", "template", "metadata", "labels"))
}

// podVolume returns the volume of dep's pod named n, or nil.
func podVolume(dep object, n string) map[string]any {
	for _, v := range getList(dep, "spec", "template", "spec", "volumes") {
		if getString(v, "name") == n {
			return v.(map[string]any)
		}
	}
	return nil
}

var portName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$`) // IANA_SVC_NAME

// checkObject checks one object on its own: the fields every object needs
// and the ones its kind needs.
func checkObject(t checker, where string, o object) {
	t.Helper()
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s: %s", where, id(o), fmt.Sprintf(format, args...))
	}
	for _, f := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}} {
		if getString(o, f...) == "" {
			errorf("no %s", strings.Join(f, "."))
		}
	}
	switch kind(o) {
	case "Deployment":
		sel := stringMap(get(o, "spec", "selector", "matchLabels"))
		if len(sel) == 0 {
			errorf("no spec.selector.matchLabels")
		}
		if !subset(sel, podLabels(o)) {
			errorf("spec.selector %v does not match the template's labels %v", sel, podLabels(o))
		}
		cs := podContainers(o)
		if len(cs) == 0 {
			errorf("no containers")
		}
		ports := podPorts(o)
		volumes := map[string]bool{}
		for _, v := range getList(o, "spec", "template", "spec", "volumes") {
			volumes[getString(v, "name")] = true
		}
		names := map[string]bool{}
		for _, c := range cs {
			cn := getString(c, "name")
			if cn == "" || getString(c, "image") == "" {
				errorf("a container without a name or an image: %v", c)
			}
			if names[cn] {
				errorf("two containers named %q", cn)
			}
			names[cn] = true
			for _, p := range getList(c, "ports") {
				if pn := getString(p, "name"); !portName.MatchString(pn) {
					errorf("container %s: port %v: name %q is not a port name", cn, get(p, "containerPort"), pn)
				}
			}
			for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
				pr := getMap(c, probe)
				if pr == nil {
					continue
				}
				var port any
				for _, h := range []string{"httpGet", "tcpSocket", "grpc"} {
					if p := get(pr, h, "port"); p != nil {
						port = p
					}
				}
				if port == nil {
					errorf("container %s: %s probes no port", cn, probe)
				} else if _, ok := ports[fmt.Sprint(port)]; !ok {
					errorf("container %s: %s probes port %v, which the pod does not declare", cn, probe, port)
				}
			}
			for _, m := range getList(c, "volumeMounts") {
				if !volumes[getString(m, "name")] {
					errorf("container %s: mounts volume %q, which the pod does not have", cn, getString(m, "name"))
				}
			}
			for _, e := range getList(c, "env") {
				if ref := getMap(e, "valueFrom", "secretKeyRef"); ref != nil && (getString(ref, "name") == "" || getString(ref, "key") == "") {
					errorf("container %s: env %s: a secretKeyRef needs a name and a key", cn, getString(e, "name"))
				}
			}
		}
	case "Service":
		if len(stringMap(get(o, "spec", "selector"))) == 0 {
			errorf("no spec.selector")
		}
		ports := getList(o, "spec", "ports")
		if len(ports) == 0 {
			errorf("no ports")
		}
		for _, p := range ports {
			if _, ok := getInt(p, "port"); !ok || !portName.MatchString(getString(p, "name")) {
				errorf("port %v needs a number and a name", p)
			}
		}
	case "PodDisruptionBudget":
		if len(stringMap(get(o, "spec", "selector", "matchLabels"))) == 0 {
			errorf("no spec.selector.matchLabels")
		}
		if get(o, "spec", "minAvailable") == nil && get(o, "spec", "maxUnavailable") == nil {
			errorf("neither minAvailable nor maxUnavailable")
		}
	case "HorizontalPodAutoscaler":
		lo, _ := getInt(o, "spec", "minReplicas")
		hi, _ := getInt(o, "spec", "maxReplicas")
		if lo < 1 || hi < lo {
			errorf("minReplicas %d, maxReplicas %d", lo, hi)
		}
		if len(getList(o, "spec", "metrics")) == 0 {
			errorf("no metrics")
		}
	case "ServiceMonitor", "PodMonitor":
		if len(stringMap(get(o, "spec", "selector", "matchLabels"))) == 0 {
			errorf("no spec.selector.matchLabels")
		}
		eps := getList(o, "spec", "endpoints")
		if kind(o) == "PodMonitor" {
			eps = getList(o, "spec", "podMetricsEndpoints")
		}
		if len(eps) == 0 {
			errorf("no endpoints")
		}
		for _, e := range eps {
			if getString(e, "port") == "" {
				errorf("an endpoint without a port name: %v", e)
			}
		}
	}
}

// checkRefs checks what the objects of one build say of each other:
// selectors select pods, monitors find ports, volumes find ConfigMaps,
// autoscalers find Deployments.
func checkRefs(t checker, where string, objs []object) {
	t.Helper()
	deps := ofKind(objs, "Deployment")
	selects := func(sel map[string]string) []object {
		var out []object
		for _, d := range deps {
			if len(sel) > 0 && subset(sel, podLabels(d)) {
				out = append(out, d)
			}
		}
		return out
	}
	configMaps := map[string]bool{}
	for _, cm := range ofKind(objs, "ConfigMap") {
		configMaps[name(cm)] = true
	}
	for _, d := range deps {
		for _, v := range getList(d, "spec", "template", "spec", "volumes") {
			if cm := getString(v, "configMap", "name"); cm != "" && !configMaps[cm] {
				t.Errorf("%s: %s: volume %s names ConfigMap %s, which the build does not have", where, id(d), getString(v, "name"), cm)
			}
		}
	}
	for _, s := range ofKind(objs, "Service") {
		pods := selects(stringMap(get(s, "spec", "selector")))
		if len(pods) == 0 {
			t.Errorf("%s: %s: its selector matches no Deployment's pods", where, id(s))
		}
		for _, p := range getList(s, "spec", "ports") {
			target := get(p, "targetPort")
			if target == nil {
				target = get(p, "port")
			}
			for _, d := range pods {
				if _, ok := podPorts(d)[fmt.Sprint(target)]; !ok {
					t.Errorf("%s: %s: port %s targets %v, which %s does not declare", where, id(s), getString(p, "name"), target, id(d))
				}
			}
		}
	}
	for _, pdb := range ofKind(objs, "PodDisruptionBudget") {
		if len(selects(stringMap(get(pdb, "spec", "selector", "matchLabels")))) == 0 {
			t.Errorf("%s: %s: its selector matches no Deployment's pods", where, id(pdb))
		}
	}
	for _, hpa := range ofKind(objs, "HorizontalPodAutoscaler") {
		ref := getMap(hpa, "spec", "scaleTargetRef")
		if !slices.ContainsFunc(deps, func(d object) bool { return kind(d) == getString(ref, "kind") && name(d) == getString(ref, "name") }) {
			t.Errorf("%s: %s: scaleTargetRef %v is not a Deployment of the build", where, id(hpa), ref)
		}
	}
	for _, sm := range ofKind(objs, "ServiceMonitor") {
		sel := stringMap(get(sm, "spec", "selector", "matchLabels"))
		var svcs []object
		for _, s := range ofKind(objs, "Service") {
			if subset(sel, stringMap(get(s, "metadata", "labels"))) {
				svcs = append(svcs, s)
			}
		}
		if len(svcs) == 0 {
			t.Errorf("%s: %s: its selector %v matches no Service's labels", where, id(sm), sel)
		}
		for _, e := range getList(sm, "spec", "endpoints") {
			for _, s := range svcs {
				if !slices.ContainsFunc(getList(s, "spec", "ports"), func(p any) bool { return getString(p, "name") == getString(e, "port") }) {
					t.Errorf("%s: %s: endpoint port %q is not a port of %s", where, id(sm), getString(e, "port"), id(s))
				}
			}
		}
	}
	for _, pm := range ofKind(objs, "PodMonitor") {
		pods := selects(stringMap(get(pm, "spec", "selector", "matchLabels")))
		if len(pods) == 0 {
			t.Errorf("%s: %s: its selector matches no Deployment's pods", where, id(pm))
		}
		for _, e := range getList(pm, "spec", "podMetricsEndpoints") {
			for _, d := range pods {
				if _, ok := podPorts(d)[getString(e, "port")]; !ok {
					t.Errorf("%s: %s: endpoint port %q is not a port of %s", where, id(pm), getString(e, "port"), id(d))
				}
			}
		}
	}
}

// checkBuild checks every object of a build on its own, what they say of
// each other, and each monitor's job label.
func checkBuild(t checker, where string, objs []object) {
	t.Helper()
	for _, o := range objs {
		checkObject(t, where, o)
	}
	checkRefs(t, where, objs)
	for _, m := range ofKind(objs, "ServiceMonitor") {
		checkMonitorJob(t, where, m, "endpoints")
	}
	for _, m := range ofKind(objs, "PodMonitor") {
		checkMonitorJob(t, where, m, "podMetricsEndpoints")
	}
}

// coorddConfigPath is where coordd's container reads its configuration.
const coorddConfigPath = "/etc/coordd/coordd.yaml"

// coorddConfigMap returns the ConfigMap that dep's coordd container
// mounts at coordd.yaml's folder.
func coorddConfigMap(t checker, objs []object, dep object) object {
	t.Helper()
	c := container(t, dep, "coordd")
	for _, m := range getList(c, "volumeMounts") {
		if path.Clean(getString(m, "mountPath")) != path.Dir(coorddConfigPath) {
			continue
		}
		cm := getString(podVolume(dep, getString(m, "name")), "configMap", "name")
		for _, o := range ofKind(objs, "ConfigMap") {
			if name(o) == cm {
				return o
			}
		}
		t.Fatalf("%s: coordd mounts ConfigMap %q at %s, which the build does not have", id(dep), cm, path.Dir(coorddConfigPath))
	}
	t.Fatalf("%s: coordd mounts no ConfigMap at %s", id(dep), path.Dir(coorddConfigPath))
	return nil
}

// coorddConfig decodes the coordd.yaml that dep's coordd container reads.
func coorddConfig(t checker, objs []object, dep object) map[string]any {
	t.Helper()
	cm := coorddConfigMap(t, objs, dep)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(getString(cm, "data", path.Base(coorddConfigPath))), &cfg); err != nil {
		t.Fatalf("%s: coordd.yaml: %v", id(cm), err)
	}
	return cfg
}

// checkCoorddContainer checks what both modes promise of the coordd
// container: the config mounted, the probes on /healthz, resources, and a
// securityContext that runs it non-root on a read-only root filesystem.
func checkCoorddContainer(t checker, where string, dep object) map[string]any {
	t.Helper()
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s: coordd: %s", where, id(dep), fmt.Sprintf(format, args...))
	}
	c := container(t, dep, "coordd")
	if cmd := getList(c, "command"); !slices.Contains(cmd, any("--config="+coorddConfigPath)) {
		errorf("command %v does not load %s", cmd, coorddConfigPath)
	}
	if n := podPorts(dep)["metrics"]; n != 7071 {
		errorf("port metrics is %d, want 7071", n)
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if p := getString(c, probe, "httpGet", "path"); p != "/healthz" {
			errorf("%s path %q, want /healthz", probe, p)
		}
	}
	for _, r := range [][]string{{"requests", "cpu"}, {"requests", "memory"}, {"limits", "memory"}} {
		if get(c, append([]string{"resources"}, r...)...) == nil {
			errorf("no resources.%s", strings.Join(r, "."))
		}
	}
	sc := getMap(c, "securityContext")
	for key, want := range map[string]any{"runAsNonRoot": true, "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false} {
		if sc[key] != want {
			errorf("securityContext.%s is %v, want %v", key, sc[key], want)
		}
	}
	if !slices.Contains(getList(sc, "capabilities", "drop"), any("ALL")) {
		errorf("securityContext does not drop ALL capabilities")
	}
	return c
}

// checkGrace checks that the pod's grace period covers coordd's shutdown:
// the preStop pause, then shutdown_timeout for in-flight calls and as much
// again for the HTTP server.
func checkGrace(t checker, where string, dep object, coordd map[string]any, cfg map[string]any) {
	t.Helper()
	grace, ok := getInt(dep, "spec", "template", "spec", "terminationGracePeriodSeconds")
	if !ok {
		grace = 30 // Kubernetes's default
	}
	shutdown := 10 * time.Second // coordd's default
	if s := getString(cfg, "shutdown_timeout"); s != "" {
		var err error
		if shutdown, err = time.ParseDuration(s); err != nil {
			t.Fatalf("%s: shutdown_timeout: %v", where, err)
		}
	}
	preStop, _ := getInt(coordd, "lifecycle", "preStop", "sleep", "seconds")
	need := time.Duration(preStop)*time.Second + 2*shutdown
	if time.Duration(grace)*time.Second <= need {
		t.Errorf("%s: %s: terminationGracePeriodSeconds %d does not exceed the preStop pause (%ds) + 2 × shutdown_timeout (%v)", where, id(dep), grace, preStop, shutdown)
	}
}

// configFiles are coordd's keys that name a file it reads.
var configFiles = [][]string{
	{"tls", "cert_file"}, {"tls", "key_file"}, {"tls", "client_ca_file"},
	{"auth", "api_keys_file"}, {"redis", "tls_ca_file"},
}

// checkConfigFiles checks that every file coordd's configuration names is
// in a volume the coordd container mounts, and, where the volume lists the
// keys it projects, is one of them.
func checkConfigFiles(t checker, where string, dep object, coordd map[string]any, cfg map[string]any) {
	t.Helper()
	for _, key := range configFiles {
		f := getString(cfg, key...)
		if f == "" {
			continue
		}
		found := false
		for _, m := range getList(coordd, "volumeMounts") {
			rel, ok := strings.CutPrefix(f, path.Clean(getString(m, "mountPath"))+"/")
			if !ok {
				continue
			}
			found = true
			v := podVolume(dep, getString(m, "name"))
			var items []any
			for _, src := range []string{"secret", "configMap"} {
				items = append(items, getList(v, src, "items")...)
			}
			if len(items) > 0 && !slices.ContainsFunc(items, func(i any) bool { return getString(i, "path") == rel }) {
				t.Errorf("%s: coordd: %s %s: volume %s projects no %s", where, strings.Join(key, "."), f, getString(v, "name"), rel)
			}
		}
		if !found {
			t.Errorf("%s: coordd: %s %s is in no volume the container mounts", where, strings.Join(key, "."), f)
		}
	}
}

// monitorJob is the job label the PodMonitor and the ServiceMonitor give
// every coordd target, and the one the alerts select.
const monitorJob = "coordd"

// checkMonitorJob: each endpoint of the monitor relabels job to monitorJob
// (the Operator's default job is the Service's or namespace/PodMonitor's
// name, which CoorddDown would not match).
func checkMonitorJob(t checker, where string, monitor map[string]any, endpoints string) {
	t.Helper()
	eps := getList(monitor, "spec", endpoints)
	if len(eps) == 0 {
		t.Errorf("%s: %s: no %s", where, id(monitor), endpoints)
	}
	for i, ep := range eps {
		ok := false
		for _, r := range getList(ep, "relabelings") {
			if getString(r, "targetLabel") == "job" && getString(r, "replacement") == monitorJob {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: %s endpoint %d: no relabeling of job to %q", where, id(monitor), i, monitorJob)
		}
	}
}

// checkSidecar checks a sidecar build: the application's Deployment whose
// pod runs coordd as a native sidecar (an init container with
// restartPolicy Always) that the application starts after (a startup
// probe), with gRPC on the pod's loopback, which every application
// container is told (COORDD_ADDR); and the rules of every build.
func checkSidecar(t checker, where string, objs []object) {
	t.Helper()
	checkBuild(t, where, objs)
	dep := one(t, objs, "Deployment")
	isCoordd := func(c any) bool { return getString(c, "name") == "coordd" }
	apps := getList(dep, "spec", "template", "spec", "containers")
	if len(apps) == 0 || slices.ContainsFunc(apps, isCoordd) {
		t.Errorf("%s: want the application in containers and coordd in initContainers (a native sidecar)", where)
	}
	if !slices.ContainsFunc(getList(dep, "spec", "template", "spec", "initContainers"), isCoordd) {
		t.Errorf("%s: coordd is not in initContainers", where)
	}
	coordd := checkCoorddContainer(t, where, dep)
	if get(coordd, "startupProbe") == nil {
		t.Errorf("%s: coordd: no startupProbe: the app would start before coordd serves", where)
	}
	if _, ok := podPorts(dep)["grpc"]; ok {
		t.Errorf("%s: the sidecar declares a grpc port, but gRPC listens on loopback", where)
	}
	cfg := coorddConfig(t, objs, dep)
	if cfg["grpc_addr"] != "127.0.0.1:7070" || cfg["http_addr"] != "0.0.0.0:7071" {
		t.Errorf("%s: config: grpc_addr %v, http_addr %v; want 127.0.0.1:7070, 0.0.0.0:7071", where, cfg["grpc_addr"], cfg["http_addr"])
	}
	for _, app := range apps {
		addr := ""
		for _, e := range getList(app, "env") {
			if getString(e, "name") == "COORDD_ADDR" {
				addr = getString(e, "value")
			}
		}
		if addr != cfg["grpc_addr"] {
			t.Errorf("%s: %s: COORDD_ADDR %q, but coordd listens on %v", where, getString(app, "name"), addr, cfg["grpc_addr"])
		}
	}
	checkGrace(t, where, dep, coordd, cfg)
	checkConfigFiles(t, where, dep, coordd, cfg)
	checkSecrets(t, where, coordd, cfg)
}

// checkShared checks a shared service: replicas spread over nodes, a
// preStop pause, Redis, authentication, the Service's ports, a
// PodDisruptionBudget that never blocks a drain; and the rules of every
// build.
func checkShared(t checker, where string, objs []object) {
	t.Helper()
	checkBuild(t, where, objs)
	dep := one(t, objs, "Deployment")
	replicas, ok := getInt(dep, "spec", "replicas")
	if hpas := ofKind(objs, "HorizontalPodAutoscaler"); len(hpas) > 0 {
		if ok {
			t.Errorf("%s: replicas %d and a HorizontalPodAutoscaler: each upgrade would reset what the autoscaler chose", where, replicas)
		}
		replicas, _ = getInt(hpas[0], "spec", "minReplicas")
	} else if !ok {
		replicas = 1
	}
	if replicas < 2 {
		t.Errorf("%s: %d replicas: a shared service of one is down at every drain", where, replicas)
	}
	coordd := checkCoorddContainer(t, where, dep)
	if n := podPorts(dep)["grpc"]; n != 7070 {
		t.Errorf("%s: port grpc is %d, want 7070", where, n)
	}
	terms := getList(dep, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	terms = append(terms, getList(dep, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")...)
	spread := false
	for _, term := range terms {
		if pt := getMap(term, "podAffinityTerm"); pt != nil {
			term = pt
		}
		sel := stringMap(get(term, "labelSelector", "matchLabels"))
		if len(sel) > 0 && subset(sel, podLabels(dep)) && getString(term, "topologyKey") != "" {
			spread = true
		}
	}
	if !spread {
		t.Errorf("%s: no pod anti-affinity term that selects coordd's own pods", where)
	}
	if _, ok := getInt(coordd, "lifecycle", "preStop", "sleep", "seconds"); !ok {
		t.Errorf("%s: coordd: no preStop pause", where)
	}
	cfg := coorddConfig(t, objs, dep)
	checkGrace(t, where, dep, coordd, cfg)
	if cfg["store"] != "redis" || cfg["grpc_addr"] != "0.0.0.0:7070" {
		t.Errorf("%s: config: store %v, grpc_addr %v; want redis, 0.0.0.0:7070", where, cfg["store"], cfg["grpc_addr"])
	}
	if get(cfg, "auth", "enabled") != true || len(getList(cfg, "auth", "api_keys")) == 0 && getString(cfg, "auth", "api_keys_file") == "" {
		t.Errorf("%s: config: a shared service needs auth.enabled and auth.api_keys or auth.api_keys_file", where)
	}
	checkConfigFiles(t, where, dep, coordd, cfg)
	checkSecrets(t, where, coordd, cfg)
	svc := one(t, objs, "Service")
	ports := map[string]int{}
	for _, p := range getList(svc, "spec", "ports") {
		ports[getString(p, "name")], _ = getInt(p, "port")
	}
	if ports["grpc"] != 7070 || ports["metrics"] != 7071 {
		t.Errorf("%s: Service ports %v, want grpc 7070 and metrics 7071", where, ports)
	}
	for _, pdb := range ofKind(objs, "PodDisruptionBudget") {
		if n, ok := getInt(pdb, "spec", "minAvailable"); ok && n >= replicas {
			t.Errorf("%s: PodDisruptionBudget minAvailable %d would block every drain of %d replicas", where, n, replicas)
		}
		if n, ok := getInt(pdb, "spec", "maxUnavailable"); ok && (n < 1 || n >= replicas) {
			t.Errorf("%s: PodDisruptionBudget maxUnavailable %d, want 1 to %d", where, n, replicas-1)
		}
	}
	if v, _ := get(dep, "spec", "template", "spec", "automountServiceAccountToken").(bool); v {
		t.Errorf("%s: coordd needs no service account token", where)
	}
}

// checkSecrets: no secret in the ConfigMap (a plain API key, Redis's
// password), and Redis's password, when given, from a Secret.
func checkSecrets(t checker, where string, coordd map[string]any, cfg map[string]any) {
	t.Helper()
	for _, k := range getList(cfg, "auth", "api_keys") {
		if getString(k, "key") != "" {
			t.Errorf("%s: config: auth.api_keys: a plain key in a ConfigMap: use key_sha256", where)
		}
	}
	if get(cfg, "redis", "password") != nil {
		t.Errorf("%s: config: redis.password in a ConfigMap: use COORDD_REDIS_PASSWORD from a Secret", where)
	}
	for _, e := range getList(coordd, "env") {
		if getString(e, "name") == "COORDD_REDIS_PASSWORD" && get(e, "valueFrom", "secretKeyRef") == nil {
			t.Errorf("%s: coordd: COORDD_REDIS_PASSWORD does not come from a Secret", where)
		}
	}
}

// secretEnv is the set of coordd's variables that come from a Secret.
func secretEnv(coordd map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, e := range getList(coordd, "env") {
		if get(e, "valueFrom", "secretKeyRef") != nil {
			out[getString(e, "name")] = true
		}
	}
	return out
}

// quantity parses a Kubernetes quantity of bytes ("256Mi", "1G", "512").
func quantity(t checker, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^(\d+)([KMGT]i|[kMGT])?$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("quantity %q: not a whole number with a suffix this test knows", s)
	}
	var n int64
	fmt.Sscan(m[1], &n)
	mult := map[string]int64{"": 1,
		"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
		"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m[2]]
	return n * mult
}

// containerEnv is the environment the kubelet gives container c: values
// with $(VAR) expanded from the variables before them, resource fields
// (limits and requests of memory) divided by their divisor and rounded up,
// and "from-a-secret" for what comes from a Secret or a ConfigMap.
func containerEnv(t checker, c map[string]any) (env map[string]string, order []string) {
	t.Helper()
	env = map[string]string{}
	ref := regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)
	for _, e := range getList(c, "env") {
		n := getString(e, "name")
		v := ref.ReplaceAllStringFunc(getString(e, "value"), func(m string) string {
			if m == "$$" {
				return "$"
			}
			if x, ok := env[m[2:len(m)-1]]; ok {
				return x
			}
			return m // the kubelet leaves an unknown reference as it is
		})
		if rf := getMap(e, "valueFrom", "resourceFieldRef"); rf != nil {
			if cn := getString(rf, "containerName"); cn != "" && cn != getString(c, "name") {
				t.Fatalf("container %s: env %s: a resource of another container", getString(c, "name"), n)
			}
			r := getString(rf, "resource")
			q := getString(c, append([]string{"resources"}, strings.SplitN(r, ".", 2)...)...)
			if !strings.HasSuffix(r, ".memory") || q == "" {
				t.Fatalf("container %s: env %s: resource %s (%q): not one this test computes", getString(c, "name"), n, r, q)
			}
			div := int64(1)
			if d := fmt.Sprint(get(rf, "divisor")); get(rf, "divisor") != nil {
				div = quantity(t, d)
			}
			v = fmt.Sprint((quantity(t, q) + div - 1) / div)
		} else if get(e, "valueFrom") != nil {
			v = "from-a-secret"
		}
		env[n] = v
		order = append(order, n)
	}
	return env, order
}

// goMemLimit parses GOMEMLIMIT as the Go runtime does: bytes, with an
// optional B, KiB, MiB, GiB or TiB suffix.
func goMemLimit(s string) (int64, bool) {
	m := regexp.MustCompile(`^(\d+)(B|KiB|MiB|GiB|TiB)?$`).FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	var n int64
	fmt.Sscan(m[1], &n)
	return n * map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]], true
}

// checkGoMemLimit: every coordd container of the build with a memory limit
// sets GOMEMLIMIT from that limit (a resourceFieldRef, not a number that a
// change of the limit would leave behind), to 90 to 100 % of it. It
// returns how many such containers it saw.
func checkGoMemLimit(t checker, where string, objs []object) (seen int) {
	t.Helper()
	for _, dep := range ofKind(objs, "Deployment") {
		for _, c := range podContainers(dep) {
			img, _, _ := strings.Cut(getString(c, "image"), ":")
			if img != "coordd" && !strings.HasSuffix(img, "/coordd") {
				continue
			}
			lim := getString(c, "resources", "limits", "memory")
			if lim == "" {
				continue
			}
			seen++
			where := fmt.Sprintf("%s: %s: container %s", where, id(dep), getString(c, "name"))
			var raw string
			fromLimit := map[string]bool{} // variables set from limits.memory
			for _, e := range getList(c, "env") {
				if getString(e, "valueFrom", "resourceFieldRef", "resource") == "limits.memory" {
					fromLimit[getString(e, "name")] = true
				}
				if getString(e, "name") == "GOMEMLIMIT" {
					raw = getString(e, "value")
				}
			}
			if raw == "" {
				t.Errorf("%s: memory limit %s but no GOMEMLIMIT value", where, lim)
				continue
			}
			derived := false
			for _, m := range regexp.MustCompile(`\$\(([^)]*)\)`).FindAllStringSubmatch(raw, -1) {
				derived = derived || fromLimit[m[1]]
			}
			if !derived {
				t.Errorf("%s: GOMEMLIMIT %q names no variable set from limits.memory", where, raw)
			}
			env, _ := containerEnv(t, c)
			got, ok := goMemLimit(env["GOMEMLIMIT"])
			if !ok {
				t.Errorf("%s: GOMEMLIMIT %q becomes %q, which the Go runtime refuses (a variable defined after it?)", where, raw, env["GOMEMLIMIT"])
				continue
			}
			if limit := quantity(t, lim); got < limit*90/100 || got > limit {
				t.Errorf("%s: GOMEMLIMIT %d bytes is %.1f %% of the limit %s; want 90 to 100 %%", where, got, 100*float64(got)/float64(limit), lim)
			}
		}
	}
	return seen
}

// selects evaluates a label selector (matchLabels and matchExpressions) on
// labels; an empty selector selects everything.
func selects(t checker, sel any, labels map[string]string) bool {
	t.Helper()
	if !subset(stringMap(get(sel, "matchLabels")), labels) {
		return false
	}
	for _, e := range getList(sel, "matchExpressions") {
		v, has := labels[getString(e, "key")]
		in := slices.Contains(getList(e, "values"), any(v))
		switch op := getString(e, "operator"); op {
		case "In":
			if !has || !in {
				return false
			}
		case "NotIn":
			if has && in {
				return false
			}
		case "Exists":
			if !has {
				return false
			}
		case "DoesNotExist":
			if has {
				return false
			}
		default:
			t.Fatalf("selector operator %q", op)
		}
	}
	return true
}

// peer is a connection's source as a NetworkPolicy sees it.
type peer struct {
	namespace string // its namespace's kubernetes.io/metadata.name
	labels    map[string]string
}

// admits reports whether the ingress rules of np let src connect to port
// of a pod it selects in namespace ns whose ports are podPorts.
func admits(t checker, np object, ns string, ports map[string]int, src peer, port int) bool {
	t.Helper()
	nsLabels := map[string]string{"kubernetes.io/metadata.name": src.namespace}
	for _, rule := range getList(np, "spec", "ingress") {
		portOK := len(getList(rule, "ports")) == 0
		for _, p := range getList(rule, "ports") {
			if getString(p, "protocol") != "" && getString(p, "protocol") != "TCP" {
				continue
			}
			if n, ok := ports[fmt.Sprint(get(p, "port"))]; ok && n == port {
				portOK = true
			}
		}
		from := getList(rule, "from")
		fromOK := len(from) == 0
		for _, f := range from {
			if get(f, "ipBlock") != nil {
				t.Fatalf("%s: an ipBlock peer, which this test does not model", id(np))
			}
			nsSel, podSel := get(f, "namespaceSelector"), get(f, "podSelector")
			inNS := src.namespace == ns
			if nsSel != nil {
				inNS = selects(t, nsSel, nsLabels)
			}
			if inNS && (podSel == nil || selects(t, podSel, src.labels)) {
				fromOK = true
			}
		}
		if portOK && fromOK {
			return true
		}
	}
	return false
}

// checkNetworkPolicy: the build's NetworkPolicy, as rendered, admits to
// the gRPC port only pods labelled coordd-client: "true", from any
// namespace, and to the metrics port only the namespace monitoring.
func checkNetworkPolicy(t checker, where string, objs []object) {
	t.Helper()
	np := one(t, objs, "NetworkPolicy")
	dep := one(t, objs, "Deployment")
	if !selects(t, get(np, "spec", "podSelector"), podLabels(dep)) {
		t.Fatalf("%s: %s: its podSelector does not select coordd's pods %v", where, id(np), podLabels(dep))
	}
	if !slices.Contains(getList(np, "spec", "policyTypes"), any("Ingress")) {
		t.Errorf("%s: %s: policyTypes has no Ingress", where, id(np))
	}
	const ns = "coordd" // wherever the build is applied
	ports := podPorts(dep)
	grpc, metrics := ports["grpc"], ports["metrics"]
	client := map[string]string{"coordd-client": "true", "app.kubernetes.io/name": "billing-api"}
	for _, c := range []struct {
		src  peer
		port int
		want bool
		what string
	}{
		{peer{ns, client}, grpc, true, "a client in coordd's namespace"},
		{peer{"billing", client}, grpc, true, "a client in another namespace"},
		{peer{"billing", map[string]string{"app.kubernetes.io/name": "billing-api"}}, grpc, false, "an unlabelled pod"},
		{peer{"billing", map[string]string{"coordd-client": "false"}}, grpc, false, `a pod labelled coordd-client: "false"`},
		{peer{ns, podLabels(dep)}, grpc, false, "another coordd pod"},
		{peer{"monitoring", map[string]string{"app.kubernetes.io/name": "prometheus"}}, grpc, false, "Prometheus"},
		{peer{"monitoring", map[string]string{"app.kubernetes.io/name": "prometheus"}}, metrics, true, "Prometheus"},
		{peer{"monitoring", nil}, metrics, true, "any pod of the namespace monitoring"},
		{peer{"billing", client}, metrics, false, "a client"},
		{peer{ns, nil}, metrics, false, "a pod of coordd's namespace"},
	} {
		if got := admits(t, np, ns, ports, c.src, c.port); got != c.want {
			t.Errorf("%s: %s: %s (namespace %s, labels %v) on port %d: admitted %v, want %v", where, id(np), c.what, c.src.namespace, c.src.labels, c.port, got, c.want)
		}
	}
}

// kubeVersion is a Kubernetes minor version, as "1.30".
type kubeVersion struct{ major, minor int }

func (v kubeVersion) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

func (v kubeVersion) less(w kubeVersion) bool {
	return v.major < w.major || v.major == w.major && v.minor < w.minor
}

// kubeFeatures are the fields the builds use that older Kubernetes
// versions reject or ignore, with the version each is on by default from.
var kubeFeatures = []struct {
	what  string
	since kubeVersion
	uses  func(c map[string]any, sidecar bool) bool
}{
	{"a native sidecar (an init container with restartPolicy: Always)", kubeVersion{1, 29},
		func(_ map[string]any, sidecar bool) bool { return sidecar }},
	{"a lifecycle hook's sleep action (preStop.sleep)", kubeVersion{1, 30},
		func(c map[string]any, _ bool) bool {
			return get(c, "lifecycle", "preStop", "sleep") != nil || get(c, "lifecycle", "postStart", "sleep") != nil
		}},
}

// checkKubeFeatures: no container of the build uses a feature newer than
// the stated minimum Kubernetes version.
func checkKubeFeatures(t checker, where string, objs []object, stated kubeVersion) {
	t.Helper()
	for _, dep := range ofKind(objs, "Deployment") {
		var cs []map[string]any
		sidecars := map[int]bool{}
		for _, c := range getList(dep, "spec", "template", "spec", "containers") {
			cs = append(cs, c.(map[string]any))
		}
		for _, c := range getList(dep, "spec", "template", "spec", "initContainers") {
			sidecars[len(cs)] = getString(c, "restartPolicy") == "Always"
			cs = append(cs, c.(map[string]any))
		}
		for i, c := range cs {
			for _, f := range kubeFeatures {
				if f.uses(c, sidecars[i]) && stated.less(f.since) {
					t.Errorf("%s: %s: container %s uses %s, which needs Kubernetes %v, but the stated minimum is %v",
						where, id(dep), getString(c, "name"), f.what, f.since, stated)
				}
			}
		}
	}
}
