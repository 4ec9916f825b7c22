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

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	kubeDir    = "kubernetes"
	sidecarDir = "kubernetes/overlays/sidecar"
	sharedDir  = "kubernetes/overlays/shared"
)

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

// TestSidecarOverlay: one pod holds the application and coordd, a native
// sidecar on the memory store, reached on the pod's loopback.
func TestSidecarOverlay(t *testing.T) {
	objs := build(t, sidecarDir)
	checkSidecar(t, sidecarDir, objs)
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
		t.Errorf("the pod runs %v, want app and coordd", names)
	}
	if cfg := coorddConfig(t, objs, dep); cfg["store"] != "memory" {
		t.Errorf("config: store %v, want memory", cfg["store"])
	}
}

// TestSharedOverlay: coordd as a service of 3 replicas on Redis Cluster.
func TestSharedOverlay(t *testing.T) {
	objs := build(t, sharedDir)
	checkShared(t, sharedDir, objs)
	if got, want := kinds(objs), []string{"ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceMonitor"}; !slices.Equal(got, want) {
		t.Errorf("kinds %v, want %v", got, want)
	}
	dep := one(t, objs, "Deployment")
	if replicas, _ := getInt(dep, "spec", "replicas"); replicas != 3 {
		t.Errorf("replicas %d, want 3", replicas)
	}
	if cfg := coorddConfig(t, objs, dep); getString(cfg, "redis", "mode") != "cluster" || len(getList(cfg, "auth", "api_keys")) == 0 {
		t.Errorf("config: redis.mode %v, auth.api_keys %v; want cluster and digests", get(cfg, "redis", "mode"), get(cfg, "auth", "api_keys"))
	}
	if !secretEnv(container(t, dep, "coordd"))["COORDD_REDIS_PASSWORD"] {
		t.Error("coordd: COORDD_REDIS_PASSWORD does not come from a Secret")
	}
}

// kubeMention finds a stated Kubernetes version in prose or a comment,
// across a line break too ("Kubernetes\n# 1.30").
var kubeMention = regexp.MustCompile(`Kubernetes(?:\s|#)+(\d+)\.(\d+)`)

// minimumKubeVersion returns the one minimum Kubernetes version that the
// README, the overlays' files and the Helm chart's files state, and fails
// the test if they state several.
func minimumKubeVersion(t *testing.T) kubeVersion {
	t.Helper()
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
	for _, dir := range []string{kubeDir, chartDir} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				scan(path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		filepath.Join(sidecarDir, "kustomization.yaml"), filepath.Join(sharedDir, "kustomization.yaml"),
		filepath.Join(chartDir, "Chart.yaml"), filepath.Join(chartDir, "values.yaml"),
	} {
		if !slices.ContainsFunc(mentions, func(m mention) bool { return m.where == f }) {
			t.Errorf("%s states no minimum Kubernetes version", f)
		}
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
	return stated
}

// TestKubernetesMinimumVersion: the README, the overlays' and the chart's
// files state one minimum Kubernetes version, and it is at least that of
// every feature an overlay uses (helm_test.go checks the chart's renders).
func TestKubernetesMinimumVersion(t *testing.T) {
	stated := minimumKubeVersion(t)
	for _, dir := range []string{sidecarDir, sharedDir} {
		checkKubeFeatures(t, dir, build(t, dir), stated)
	}
}

// TestGoMemLimit: every coordd container of the overlays with a memory
// limit sets GOMEMLIMIT from that limit (checkGoMemLimit).
func TestGoMemLimit(t *testing.T) {
	seen := 0
	for _, dir := range []string{sidecarDir, sharedDir} {
		seen += checkGoMemLimit(t, dir, build(t, dir))
	}
	if seen < 2 {
		t.Errorf("found %d coordd containers with a memory limit, want one in each overlay", seen)
	}
}

// TestNetworkPolicy: in the shared overlay, as rendered (this overlay's
// labels rewrite selectors), the gRPC port admits only pods labelled
// coordd-client: "true", from any namespace, and the metrics port only the
// namespace monitoring (checkNetworkPolicy).
func TestNetworkPolicy(t *testing.T) {
	checkNetworkPolicy(t, sharedDir, build(t, sharedDir))
}
