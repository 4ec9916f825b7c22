package deploy

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const (
	composeDir  = "compose"
	composeFile = "compose/compose.yaml"
)

// composeServices returns compose.yaml's services, with YAML merge keys
// (<<: *anchor) resolved by the decoder.
func composeServices(t *testing.T) map[string]map[string]any {
	t.Helper()
	doc := readDoc(t, composeFile)
	out := map[string]map[string]any{}
	for n, s := range getMap(doc, "services") {
		m, ok := s.(map[string]any)
		if !ok {
			t.Fatalf("service %s is not a mapping", n)
		}
		out[n] = m
	}
	return out
}

// strs returns a list of strings, or a string split on spaces (compose's
// short form of command).
func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return strings.Fields(x)
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// dependsOn returns a service's depends_on as name -> condition, in either
// of compose's forms (a list means service_started).
func dependsOn(s map[string]any) map[string]string {
	out := map[string]string{}
	switch d := s["depends_on"].(type) {
	case []any:
		for _, n := range d {
			out[fmt.Sprint(n)] = "service_started"
		}
	case map[string]any:
		for n, c := range d {
			cond := getString(c, "condition")
			if cond == "" {
				cond = "service_started"
			}
			out[n] = cond
		}
	}
	return out
}

// environment returns a service's environment in either form.
func environment(s map[string]any) map[string]string {
	out := map[string]string{}
	switch e := s["environment"].(type) {
	case map[string]any:
		for k, v := range e {
			out[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
			out[k] = v
		}
	}
	return out
}

// bindMounts returns a service's volumes that are host paths: source ->
// target.
func bindMounts(s map[string]any) map[string]string {
	out := map[string]string{}
	for _, v := range getList(s, "volumes") {
		var src, dst string
		if m, ok := v.(map[string]any); ok {
			src, dst = getString(m, "source"), getString(m, "target")
		} else {
			parts := strings.Split(fmt.Sprint(v), ":")
			src = parts[0]
			if len(parts) > 1 {
				dst = parts[1]
			}
		}
		if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
			out[src] = dst
		}
	}
	return out
}

// TestCompose: a Redis Cluster of 6 nodes formed by a one-shot init
// service, 2 coordd replicas built from the repository on it, Prometheus and
// Grafana; every dependency and file it names exists.
func TestCompose(t *testing.T) {
	services := composeServices(t)

	var redis, coordd []string
	var initName string
	for n, s := range services {
		cmd := strs(s["command"])
		switch {
		case strings.HasPrefix(getString(s, "image"), "redis:7") && len(cmd) > 0 && cmd[0] == "redis-server":
			redis = append(redis, n)
		case slices.ContainsFunc(cmd, func(a string) bool { return strings.Contains(a, "redis-cluster-init") }):
			initName = n
		case s["build"] != nil:
			coordd = append(coordd, n)
		}
	}
	sort.Strings(redis)
	sort.Strings(coordd)
	if len(redis) != 6 {
		t.Fatalf("%d Redis nodes (%v), want 6", len(redis), redis)
	}
	if initName == "" {
		t.Fatal("no service runs redis-cluster-init.sh")
	}
	if len(coordd) != 2 {
		t.Fatalf("%d services built from the repository (%v), want 2 coordd replicas", len(coordd), coordd)
	}
	for _, n := range []string{"prometheus", "grafana"} {
		if services[n] == nil {
			t.Errorf("no %s service", n)
		}
	}

	// Every depends_on names a service; every bind mount's source exists.
	for n, s := range services {
		for dep := range dependsOn(s) {
			if services[dep] == nil {
				t.Errorf("%s depends on %s, which is not a service", n, dep)
			}
		}
		for src := range bindMounts(s) {
			if _, err := os.Stat(filepath.Join(composeDir, src)); err != nil {
				t.Errorf("%s mounts %s: %v", n, src, err)
			}
		}
	}
	// No two services publish the same host port.
	published := map[string]string{}
	for n, s := range services {
		for _, p := range strs(s["ports"]) {
			host := p[:strings.LastIndex(p, ":")]
			if other, dup := published[host]; dup {
				t.Errorf("%s and %s both publish %s", n, other, host)
			}
			published[host] = n
		}
	}

	// Redis nodes: cluster mode from the mounted redis.conf, each announcing
	// its service name, with a health check the init service waits for.
	for _, n := range redis {
		s := services[n]
		cmd := strs(s["command"])
		if i := slices.Index(cmd, "--cluster-announce-hostname"); i < 0 || i+1 >= len(cmd) || cmd[i+1] != n {
			t.Errorf("%s: command %v does not announce the hostname %s", n, cmd, n)
		}
		if s["healthcheck"] == nil {
			t.Errorf("%s: no healthcheck", n)
		}
		conf := ""
		for src, dst := range bindMounts(s) {
			if slices.Contains(cmd, dst) {
				conf = filepath.Join(composeDir, src)
			}
		}
		if conf == "" {
			t.Errorf("%s: the config file in its command is not mounted from the repository", n)
			continue
		}
		data, err := os.ReadFile(conf)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{"cluster-enabled yes", "cluster-preferred-endpoint-type hostname", "protected-mode no"} {
			if !strings.Contains(string(data), "\n"+line+"\n") {
				t.Errorf("%s: no line %q", conf, line)
			}
		}
	}

	// The init service: waits for every node, forms the cluster with a
	// replica per master.
	in := services[initName]
	deps := dependsOn(in)
	for _, n := range redis {
		if deps[n] != "service_healthy" {
			t.Errorf("%s: depends on %s with %q, want service_healthy", initName, n, deps[n])
		}
	}
	var nodes []string
	for _, node := range strings.Fields(environment(in)["REDIS_NODES"]) {
		nodes = append(nodes, strings.TrimSuffix(node, ":6379"))
	}
	sort.Strings(nodes)
	if !slices.Equal(nodes, redis) {
		t.Errorf("%s: REDIS_NODES names %v, want the Redis services %v (port 6379)", initName, nodes, redis)
	}
	if r := getString(in, "restart"); r != "" && r != "no" {
		t.Errorf("%s: restart %q: a one-shot must not restart", initName, r)
	}
	script := filepath.Join(composeDir, "redis-cluster-init.sh")
	data, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"redis-cli --cluster create", "--cluster-replicas 1", "--cluster-yes"} {
		if !strings.Contains(string(data), s) {
			t.Errorf("%s: no %q", script, s)
		}
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		if out, err := exec.Command(sh, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", script, err, out)
		}
	}

	// coordd: built from the repository's Dockerfile, on the cluster, once
	// it is formed.
	for _, n := range coordd {
		s := services[n]
		ctx := getString(s, "build", "context")
		if ctx == "" {
			ctx = getString(s, "build")
		}
		dockerfile := getString(s, "build", "dockerfile")
		if dockerfile == "" {
			dockerfile = "Dockerfile"
		}
		if abs, _ := filepath.Abs(filepath.Join(composeDir, ctx)); abs != mustAbs(t, repoRoot) {
			t.Errorf("%s: build context %s is not the repository's root", n, ctx)
		}
		if _, err := os.Stat(filepath.Join(composeDir, ctx, dockerfile)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		if !slices.Contains(strs(s["command"]), "--store=redis") {
			t.Errorf("%s: command %v lacks --store=redis", n, s["command"])
		}
		env := environment(s)
		addrs := strings.Split(env["COORDD_REDIS_ADDRS"], ",")
		for _, a := range addrs {
			host, port, _ := strings.Cut(a, ":")
			if !slices.Contains(redis, host) || port != "6379" {
				t.Errorf("%s: COORDD_REDIS_ADDRS names %q, not a Redis service's port 6379", n, a)
			}
		}
		if env["COORDD_REDIS_MODE"] != "cluster" {
			t.Errorf("%s: COORDD_REDIS_MODE %q, want cluster", n, env["COORDD_REDIS_MODE"])
		}
		if c := dependsOn(s)[initName]; c != "service_completed_successfully" {
			t.Errorf("%s: depends on %s with %q, want service_completed_successfully", n, initName, c)
		}
	}

	// Prometheus scrapes both replicas and loads the rules; Grafana gets
	// the dashboard and a data source that points at Prometheus.
	prom := bindMounts(services["prometheus"])
	for _, f := range []string{"prometheus.yml", "alerts.yml"} {
		if prom["../prometheus/"+f] != "/etc/prometheus/"+f {
			t.Errorf("prometheus: ../prometheus/%s is not mounted at /etc/prometheus/%s", f, f)
		}
	}
	var targets []string
	for _, sc := range getList(readDoc(t, "prometheus/prometheus.yml"), "scrape_configs") {
		if getString(sc, "job_name") == "coordd" {
			for _, c := range getList(sc, "static_configs") {
				targets = append(targets, strs(get(c, "targets"))...)
			}
		}
	}
	var want []string
	for _, n := range coordd {
		want = append(want, n+":7071")
	}
	sort.Strings(targets)
	if !slices.Equal(targets, want) {
		t.Errorf("prometheus.yml: job coordd scrapes %v, want %v", targets, want)
	}
	graf := bindMounts(services["grafana"])
	if graf["../grafana/provisioning"] != "/etc/grafana/provisioning" {
		t.Error("grafana: ../grafana/provisioning is not mounted at /etc/grafana/provisioning")
	}
	dashDir := ""
	for _, p := range getList(readDoc(t, "grafana/provisioning/dashboards/coordd.yml"), "providers") {
		dashDir = getString(p, "options", "path")
	}
	if graf["../grafana/coordd-dashboard.json"] != dashDir+"/coordd-dashboard.json" {
		t.Errorf("grafana: the dashboard is not mounted in the provisioned directory %q", dashDir)
	}
	for _, ds := range getList(readDoc(t, "grafana/provisioning/datasources/prometheus.yml"), "datasources") {
		u, err := url.Parse(getString(ds, "url"))
		if err != nil || services[u.Hostname()] == nil {
			t.Errorf("grafana data source %s: url %q is not a compose service", getString(ds, "name"), getString(ds, "url"))
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
