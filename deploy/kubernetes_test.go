package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	kubeDir    = "kubernetes"
	sidecarDir = "kubernetes/overlays/sidecar"
	sharedDir  = "kubernetes/overlays/shared"
)

// object is one Kubernetes object, decoded.
type object = map[string]any

func kind(o object) string { return getString(o, "kind") }
func name(o object) string { return getString(o, "metadata", "name") }
func id(o object) string   { return kind(o) + "/" + name(o) }

// build runs kustomize on dir, in process, and decodes what it gives.
func build(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := parseDocs(dir+".yaml", out)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []object
	for _, d := range docs {
		objs = append(objs, d.(object))
	}
	return objs
}

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
func one(t *testing.T, objs []object, k string) object {
	t.Helper()
	l := ofKind(objs, k)
	if len(l) != 1 {
		t.Fatalf("want one %s, got %d", k, len(l))
	}
	return l[0]
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
func container(t *testing.T, dep object, n string) map[string]any {
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

var portName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$`) // IANA_SVC_NAME

// checkObject checks one object on its own: the fields every object needs
// and the ones its kind needs.
func checkObject(t *testing.T, where string, o object) {
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
// selectors select pods, monitors find ports, volumes find ConfigMaps.
func checkRefs(t *testing.T, where string, objs []object) {
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

// kustomization is what the tests read of a kustomization.yaml.
type kustomization struct {
	Resources          []string                `yaml:"resources"`
	Patches            []struct{ Path string } `yaml:"patches"`
	ConfigMapGenerator []struct {
		Files []string `yaml:"files"`
	} `yaml:"configMapGenerator"`
	SecretGenerator []struct {
		Files []string `yaml:"files"`
	} `yaml:"secretGenerator"`
}

// TestKubernetesFiles: every file under kubernetes/ is a kustomization, or
// is named by one (as a resource, a patch or a generator's input); every
// resource file holds complete objects.
func TestKubernetesFiles(t *testing.T) {
	roles := map[string]string{} // file -> resource, patch, input, kustomization
	err := filepath.WalkDir(kubeDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		roles[path] = "kustomization"
		dir := filepath.Dir(path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var k kustomization
		if err := yaml.Unmarshal(data, &k); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		add := func(role, f string) {
			if _, key, ok := strings.Cut(f, "="); ok { // key=file
				f = key
			}
			p := filepath.Join(dir, f)
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			roles[p] = role
		}
		for _, r := range k.Resources {
			add("resource", r)
		}
		for _, p := range k.Patches {
			if p.Path != "" {
				add("patch", p.Path)
			}
		}
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.Files {
				add("input", f)
			}
		}
		for _, g := range k.SecretGenerator {
			for _, f := range g.Files {
				add("input", f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var resources int
	err = filepath.WalkDir(kubeDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch roles[path] {
		case "":
			t.Errorf("%s: no kustomization names it (a leftover?)", path)
		case "resource":
			for _, doc := range readDocs(t, path) {
				o, ok := doc.(object)
				if !ok {
					t.Errorf("%s: a document that is not an object", path)
					continue
				}
				resources++
				checkObject(t, path, o)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if resources < 5 {
		t.Errorf("only %d objects in resource files", resources)
	}
	if _, err := os.Stat(filepath.Join(kubeDir, "sidecar.yaml")); err == nil {
		t.Error("kubernetes/sidecar.yaml is back: the sidecar overlay replaces it")
	}
}

// coorddConfig decodes coordd.yaml from the build's coordd-config ConfigMap.
func coorddConfig(t *testing.T, objs []object) map[string]any {
	t.Helper()
	for _, cm := range ofKind(objs, "ConfigMap") {
		if strings.HasPrefix(name(cm), "coordd-config") {
			var cfg map[string]any
			if err := yaml.Unmarshal([]byte(getString(cm, "data", "coordd.yaml")), &cfg); err != nil {
				t.Fatalf("%s: coordd.yaml: %v", id(cm), err)
			}
			return cfg
		}
	}
	t.Fatal("no coordd-config ConfigMap")
	return nil
}

func kinds(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, kind(o))
	}
	sort.Strings(out)
	return out
}

// checkCoorddContainer checks what both overlays promise of the coordd
// container: the config mounted, the probes on /healthz, resources, and a
// securityContext that runs it non-root on a read-only root filesystem.
func checkCoorddContainer(t *testing.T, dep object) map[string]any {
	t.Helper()
	c := container(t, dep, "coordd")
	if cmd := getList(c, "command"); !slices.Contains(cmd, any("--config=/etc/coordd/coordd.yaml")) {
		t.Errorf("coordd: command %v does not load /etc/coordd/coordd.yaml", cmd)
	}
	if n := podPorts(dep)["metrics"]; n != 7071 {
		t.Errorf("coordd: port metrics is %d, want 7071", n)
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if p := getString(c, probe, "httpGet", "path"); p != "/healthz" {
			t.Errorf("coordd: %s path %q, want /healthz", probe, p)
		}
	}
	for _, r := range [][]string{{"requests", "cpu"}, {"requests", "memory"}, {"limits", "memory"}} {
		if get(c, append([]string{"resources"}, r...)...) == nil {
			t.Errorf("coordd: no resources.%s", strings.Join(r, "."))
		}
	}
	sc := getMap(c, "securityContext")
	for key, want := range map[string]any{"runAsNonRoot": true, "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false} {
		if sc[key] != want {
			t.Errorf("coordd: securityContext.%s is %v, want %v", key, sc[key], want)
		}
	}
	if !slices.Contains(getList(sc, "capabilities", "drop"), any("ALL")) {
		t.Error("coordd: securityContext does not drop ALL capabilities")
	}
	return c
}

// checkGrace checks that the pod's grace period covers coordd's shutdown:
// the preStop pause, then shutdown_timeout for in-flight calls and as much
// again for the HTTP server.
func checkGrace(t *testing.T, dep object, coordd map[string]any, cfg map[string]any) {
	t.Helper()
	grace, ok := getInt(dep, "spec", "template", "spec", "terminationGracePeriodSeconds")
	if !ok {
		grace = 30 // Kubernetes's default
	}
	shutdown := 10 * time.Second // coordd's default
	if s := getString(cfg, "shutdown_timeout"); s != "" {
		var err error
		if shutdown, err = time.ParseDuration(s); err != nil {
			t.Fatalf("shutdown_timeout: %v", err)
		}
	}
	preStop, _ := getInt(coordd, "lifecycle", "preStop", "sleep", "seconds")
	need := time.Duration(preStop)*time.Second + 2*shutdown
	if time.Duration(grace)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %d does not exceed the preStop pause (%ds) + 2 × shutdown_timeout (%v)", grace, preStop, shutdown)
	}
}

// TestSidecarOverlay: one pod holds the application and coordd, a native
// sidecar on the memory store, reached on the pod's loopback.
func TestSidecarOverlay(t *testing.T) {
	objs := build(t, sidecarDir)
	for _, o := range objs {
		checkObject(t, sidecarDir, o)
	}
	checkRefs(t, sidecarDir, objs)
	if got, want := kinds(objs), []string{"ConfigMap", "Deployment", "PodMonitor"}; !slices.Equal(got, want) {
		t.Errorf("kinds %v, want %v", got, want)
	}
	dep := one(t, objs, "Deployment")
	var names []string
	for _, c := range podContainers(dep) {
		names = append(names, getString(c, "name"))
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"app", "coordd"}) {
		t.Fatalf("the pod runs %v, want app and coordd", names)
	}
	if len(getList(dep, "spec", "template", "spec", "containers")) != 1 || len(getList(dep, "spec", "template", "spec", "initContainers")) != 1 {
		t.Error("want the app in containers and coordd in initContainers (a native sidecar)")
	}
	coordd := checkCoorddContainer(t, dep)
	if get(coordd, "startupProbe") == nil {
		t.Error("coordd: no startupProbe: the app would start before coordd serves")
	}
	if _, ok := podPorts(dep)["grpc"]; ok {
		t.Error("the sidecar declares a grpc port, but gRPC listens on loopback")
	}
	cfg := coorddConfig(t, objs)
	if cfg["store"] != "memory" || cfg["grpc_addr"] != "127.0.0.1:7070" || cfg["http_addr"] != "0.0.0.0:7071" {
		t.Errorf("config: store %v, grpc_addr %v, http_addr %v; want memory, 127.0.0.1:7070, 0.0.0.0:7071", cfg["store"], cfg["grpc_addr"], cfg["http_addr"])
	}
	app := container(t, dep, "app")
	addr := ""
	for _, e := range getList(app, "env") {
		if getString(e, "name") == "COORDD_ADDR" {
			addr = getString(e, "value")
		}
	}
	if addr != cfg["grpc_addr"] {
		t.Errorf("app: COORDD_ADDR %q, but coordd listens on %v", addr, cfg["grpc_addr"])
	}
	checkGrace(t, dep, coordd, cfg)
	checkMonitorJob(t, one(t, objs, "PodMonitor"), "podMetricsEndpoints")
}

// monitorJob is the job label the PodMonitor and the ServiceMonitor give
// every coordd target, and the one the alerts select.
const monitorJob = "coordd"

// checkMonitorJob: each endpoint of the monitor relabels job to monitorJob
// (the Operator's default job is the Service's or namespace/PodMonitor's
// name, which CoorddDown would not match).
func checkMonitorJob(t *testing.T, monitor map[string]any, endpoints string) {
	t.Helper()
	eps := getList(monitor, "spec", endpoints)
	if len(eps) == 0 {
		t.Fatalf("%s: no %s", getString(monitor, "kind"), endpoints)
	}
	for i, ep := range eps {
		ok := false
		for _, r := range getList(ep, "relabelings") {
			if getString(r, "targetLabel") == "job" && getString(r, "replacement") == monitorJob {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s endpoint %d: no relabeling of job to %q", getString(monitor, "kind"), i, monitorJob)
		}
	}
}

// TestSharedOverlay: coordd as a service of 3 replicas on Redis Cluster.
func TestSharedOverlay(t *testing.T) {
	objs := build(t, sharedDir)
	for _, o := range objs {
		checkObject(t, sharedDir, o)
	}
	checkRefs(t, sharedDir, objs)
	if got, want := kinds(objs), []string{"ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceMonitor"}; !slices.Equal(got, want) {
		t.Errorf("kinds %v, want %v", got, want)
	}
	dep := one(t, objs, "Deployment")
	replicas, _ := getInt(dep, "spec", "replicas")
	if replicas != 3 {
		t.Errorf("replicas %d, want 3", replicas)
	}
	coordd := checkCoorddContainer(t, dep)
	if n := podPorts(dep)["grpc"]; n != 7070 {
		t.Errorf("port grpc is %d, want 7070", n)
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
		t.Error("no pod anti-affinity term that selects coordd's own pods")
	}
	if _, ok := getInt(coordd, "lifecycle", "preStop", "sleep", "seconds"); !ok {
		t.Error("coordd: no preStop pause")
	}
	cfg := coorddConfig(t, objs)
	checkGrace(t, dep, coordd, cfg)
	if cfg["store"] != "redis" || cfg["grpc_addr"] != "0.0.0.0:7070" || getString(cfg, "redis", "mode") != "cluster" {
		t.Errorf("config: store %v, grpc_addr %v, redis.mode %v; want redis, 0.0.0.0:7070, cluster", cfg["store"], cfg["grpc_addr"], get(cfg, "redis", "mode"))
	}
	if get(cfg, "auth", "enabled") != true || len(getList(cfg, "auth", "api_keys")) == 0 {
		t.Error("config: a shared service needs auth.enabled and auth.api_keys")
	}
	for _, k := range getList(cfg, "auth", "api_keys") {
		if getString(k, "key") != "" {
			t.Errorf("config: auth.api_keys: a plain key in a ConfigMap: use key_sha256")
		}
	}
	secretEnv := map[string]bool{}
	for _, e := range getList(coordd, "env") {
		if get(e, "valueFrom", "secretKeyRef") != nil {
			secretEnv[getString(e, "name")] = true
		}
	}
	if !secretEnv["COORDD_REDIS_PASSWORD"] {
		t.Error("coordd: COORDD_REDIS_PASSWORD does not come from a Secret")
	}
	checkMonitorJob(t, one(t, objs, "ServiceMonitor"), "endpoints")
	svc := one(t, objs, "Service")
	ports := map[string]int{}
	for _, p := range getList(svc, "spec", "ports") {
		ports[getString(p, "name")], _ = getInt(p, "port")
	}
	if ports["grpc"] != 7070 || ports["metrics"] != 7071 {
		t.Errorf("Service ports %v, want grpc 7070 and metrics 7071", ports)
	}
	pdb := one(t, objs, "PodDisruptionBudget")
	if n, ok := getInt(pdb, "spec", "minAvailable"); ok && n >= replicas {
		t.Errorf("PodDisruptionBudget minAvailable %d would block every drain of %d replicas", n, replicas)
	}
	if n, ok := getInt(pdb, "spec", "maxUnavailable"); ok && (n < 1 || n >= replicas) {
		t.Errorf("PodDisruptionBudget maxUnavailable %d, want 1 to %d", n, replicas-1)
	}
	if v, _ := get(dep, "spec", "template", "spec", "automountServiceAccountToken").(bool); v {
		t.Error("coordd needs no service account token")
	}
}

// kubeVersion is a Kubernetes minor version, as "1.30".
type kubeVersion struct{ major, minor int }

func (v kubeVersion) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

func (v kubeVersion) less(w kubeVersion) bool {
	return v.major < w.major || v.major == w.major && v.minor < w.minor
}

// kubeMention finds a stated Kubernetes version in prose or a comment,
// across a line break too ("Kubernetes\n# 1.30").
var kubeMention = regexp.MustCompile(`Kubernetes(?:\s|#)+(\d+)\.(\d+)`)

// kubeFeatures are the fields the overlays use that older Kubernetes
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

// TestKubernetesMinimumVersion: the README and the manifests' comments
// state one minimum Kubernetes version, and it is at least that of every
// feature an overlay uses; each overlay states it.
func TestKubernetesMinimumVersion(t *testing.T) {
	type mention struct {
		where string
		v     kubeVersion
	}
	var mentions []mention
	scan := func(path string) int {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ms := kubeMention.FindAllSubmatch(data, -1)
		for _, m := range ms {
			var v kubeVersion
			fmt.Sscan(string(m[1]), &v.major)
			fmt.Sscan(string(m[2]), &v.minor)
			mentions = append(mentions, mention{path, v})
		}
		return len(ms)
	}
	if scan(filepath.Join(repoRoot, "README.md")) == 0 {
		t.Error("README.md states no minimum Kubernetes version")
	}
	err := filepath.WalkDir(kubeDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			scan(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mentions) == 0 {
		t.Fatal("no Kubernetes version stated anywhere")
	}
	stated := mentions[0].v
	for _, m := range mentions[1:] {
		if m.v != stated {
			t.Errorf("%s says Kubernetes %v, %s says %v: state one minimum", m.where, m.v, mentions[0].where, stated)
		}
	}
	for _, dir := range []string{sidecarDir, sharedDir} {
		if scan(filepath.Join(dir, "kustomization.yaml")) == 0 {
			t.Errorf("%s/kustomization.yaml states no minimum Kubernetes version", dir)
		}
		for _, dep := range ofKind(build(t, dir), "Deployment") {
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
							dir, id(dep), getString(c, "name"), f.what, f.since, stated)
					}
				}
			}
		}
	}
}

// quantity parses a Kubernetes quantity of bytes ("256Mi", "1G", "512").
func quantity(t *testing.T, s string) int64 {
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
func containerEnv(t *testing.T, c map[string]any) (env map[string]string, order []string) {
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

// TestGoMemLimit: every coordd container with a memory limit sets
// GOMEMLIMIT from that limit (a resourceFieldRef, not a number that a
// change of the limit would leave behind), to 90 to 100 % of it.
func TestGoMemLimit(t *testing.T) {
	seen := 0
	for _, dir := range []string{sidecarDir, sharedDir} {
		for _, dep := range ofKind(build(t, dir), "Deployment") {
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
				where := fmt.Sprintf("%s: %s: container %s", dir, id(dep), getString(c, "name"))
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
	}
	if seen < 2 {
		t.Errorf("found %d coordd containers with a memory limit, want one in each overlay", seen)
	}
}

// selects evaluates a label selector (matchLabels and matchExpressions) on
// labels; an empty selector selects everything.
func selects(t *testing.T, sel any, labels map[string]string) bool {
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
func admits(t *testing.T, np object, ns string, ports map[string]int, src peer, port int) bool {
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

// TestNetworkPolicy: in the shared overlay, as rendered (this overlay's
// labels rewrite selectors), the gRPC port admits only pods labelled
// coordd-client: "true", from any namespace, and the metrics port only the
// namespace monitoring.
func TestNetworkPolicy(t *testing.T) {
	objs := build(t, sharedDir)
	np := one(t, objs, "NetworkPolicy")
	dep := one(t, objs, "Deployment")
	if !selects(t, get(np, "spec", "podSelector"), podLabels(dep)) {
		t.Fatalf("%s: its podSelector does not select coordd's pods %v", id(np), podLabels(dep))
	}
	if !slices.Contains(getList(np, "spec", "policyTypes"), any("Ingress")) {
		t.Errorf("%s: policyTypes has no Ingress", id(np))
	}
	const ns = "coordd" // wherever the overlay is applied
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
			t.Errorf("%s: %s (namespace %s, labels %v) on port %d: admitted %v, want %v", id(np), c.what, c.src.namespace, c.src.labels, c.port, got, c.want)
		}
	}
}
