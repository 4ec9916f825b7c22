package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the repository's root, seen from this package's directory
// (deploy/), where go test runs the tests.
const repoRoot = ".."

// readDocs parses every YAML document of path (one for JSON).
func readDocs(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := parseDocs(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func parseDocs(path string, data []byte) ([]any, error) {
	if strings.HasSuffix(path, ".json") {
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%s: data after the JSON value", path)
		}
		return []any{v}, nil
	}
	var docs []any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if v != nil { // an empty document (a trailing ---)
			docs = append(docs, v)
		}
	}
}

// readDoc parses a file that holds one document.
func readDoc(t *testing.T, path string) map[string]any {
	t.Helper()
	docs := readDocs(t, path)
	if len(docs) != 1 {
		t.Fatalf("%s: want one document, got %d", path, len(docs))
	}
	m, ok := docs[0].(map[string]any)
	if !ok {
		t.Fatalf("%s: the document is a %T, not a mapping", path, docs[0])
	}
	return m
}

// get follows keys through nested maps; nil if any is missing.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func getMap(v any, keys ...string) map[string]any {
	m, _ := get(v, keys...).(map[string]any)
	return m
}

func getList(v any, keys ...string) []any {
	l, _ := get(v, keys...).([]any)
	return l
}

func getString(v any, keys ...string) string {
	s, _ := get(v, keys...).(string)
	return s
}

// getInt reads a number that YAML or JSON decoded as int or float64.
func getInt(v any, keys ...string) (int, bool) {
	switch n := get(v, keys...).(type) {
	case int:
		return n, true
	case float64:
		return int(n), n == float64(int(n))
	}
	return 0, false
}

// stringMap turns a map of strings (labels, a selector) into a Go map.
func stringMap(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

// subset reports whether every pair of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// deployFiles lists the .yaml, .yml and .json files under deploy/, but
// the Helm chart's templates.
func deployFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() && path == filepath.Join(chartDir, "templates") {
			return filepath.SkipDir // Go templates: helm_test.go renders them
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestFilesParse: every YAML (each document of it) and JSON file under
// deploy/ parses.
func TestFilesParse(t *testing.T) {
	files := deployFiles(t)
	if len(files) < 15 {
		t.Fatalf("found only %d files: %v", len(files), files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := parseDocs(f, data)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(docs) == 0 {
			t.Errorf("%s: no document", f)
		}
	}
}

// TestGoVersion: this module's go line is the root module's, so that both
// build with the same toolchain.
func TestGoVersion(t *testing.T) {
	goLine := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no go line", path)
		}
		return string(m[1])
	}
	if root, here := goLine(filepath.Join(repoRoot, "go.mod")), goLine("go.mod"); root != here {
		t.Errorf("deploy/go.mod says go %s, the root go.mod go %s", here, root)
	}
}

// TestDockerfile: a Go build stage on the root module's Go, a static build
// of every command, a distroless non-root final stage with the health check.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Instructions, with continuation lines joined and comments dropped.
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && cur.Len() == 0 {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	var stages [][]string // each stage's instructions, FROM first
	for _, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("instruction before FROM: %s", l)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], l)
	}
	if len(stages) != 2 {
		t.Fatalf("want 2 stages (build, final), got %d", len(stages))
	}
	has := func(stage []string, re string) bool {
		for _, l := range stage {
			if regexp.MustCompile(re).MatchString(l) {
				return true
			}
		}
		return false
	}

	data, err = os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goMinor := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(data)
	build, final := stages[0], stages[1]
	for _, re := range []string{
		`^FROM golang:` + regexp.QuoteMeta(string(goMinor[1])) + `\S* AS build$`,
		`CGO_ENABLED=0`,
		`^RUN .*go build .*-trimpath`,
		`^RUN .*go build .*-ldflags="-s -w"`,
		// Every command under cmd/, coordctl included.
		`^RUN .*go build .* \./cmd/\.\.\.$`,
	} {
		if !has(build, re) {
			t.Errorf("build stage: no instruction matches %s", re)
		}
	}
	copied := map[string]bool{}
	for _, l := range build {
		if f := strings.Fields(l); f[0] == "COPY" && !strings.HasPrefix(f[1], "--") {
			for _, src := range f[1 : len(f)-1] {
				copied[strings.TrimPrefix(filepath.Clean(src), "./")] = true
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("build stage: %s: %v", l, err)
				}
			}
		}
	}
	// Every directory of the repository that the commands import is copied
	// into the build stage.
	if goBin, err := exec.LookPath("go"); err == nil {
		cmd := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/...")
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./cmd/...: %v", err)
		}
		const module = "github.com/coordd/coordd/"
		for _, pkg := range strings.Fields(string(out)) {
			if rest, ok := strings.CutPrefix(pkg, module); ok {
				if dir, _, _ := strings.Cut(rest, "/"); !copied[dir] {
					t.Errorf("build stage: %s is imported by ./cmd/... but %s/ is not copied", pkg, dir)
				}
			}
		}
	}
	for _, re := range []string{
		`^FROM gcr\.io/distroless/static-debian12:nonroot( AS \w+)?$`,
		`^COPY --from=build /out/ /usr/local/bin/$`,
		`^USER nonroot(:nonroot)?$`,
		`^EXPOSE 7070 7071$`,
		`^HEALTHCHECK .*CMD \["/usr/local/bin/coordd", "healthcheck"\]$`,
		`^ENTRYPOINT \["/usr/local/bin/coordd"`,
	} {
		if !has(final, re) {
			t.Errorf("final stage: no instruction matches %s", re)
		}
	}
	if has(final, `^RUN `) {
		t.Error("final stage: RUN in a distroless stage (it has no shell)")
	}
}
