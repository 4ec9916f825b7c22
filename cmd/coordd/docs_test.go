package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayoutNamesEverything keeps the README's layout whole: it names
// every top-level folder and every package under internal/.
func TestReadmeLayoutNamesEverything(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	layout, ok := strings.CutPrefix(string(readme[strings.Index(string(readme), "\n## Layout\n")+1:]), "## Layout\n")
	if !ok {
		t.Fatal(`README.md has no "## Layout" section`)
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	top, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range top {
		if d.IsDir() && !strings.HasPrefix(d.Name(), ".") && !ignored(t, d.Name()) && !strings.Contains(layout, "\n"+d.Name()+"/") {
			t.Errorf("README.md's layout does not name the folder %s/", d.Name())
		}
	}
	seen := map[string]bool{}
	err = filepath.WalkDir("../../internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(strings.TrimPrefix(filepath.Dir(path), "../../"))
		if !seen[pkg] && !strings.Contains(layout, "\n"+pkg+"/") && !strings.Contains(layout, "\n"+pkg+" ") {
			t.Errorf("README.md's layout does not name the package %s", pkg)
		}
		seen[pkg] = true
		return nil
	})
	if len(seen) < 15 {
		t.Fatalf("found %d packages under internal/; the walk must be broken", len(seen))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// ignored reports whether git ignores the top-level folder name (bin/,
// where the README's tour builds grpcurl, say): not part of the layout.
func ignored(t *testing.T, name string) bool {
	t.Helper()
	err := exec.Command("git", "-C", "../..", "check-ignore", "-q", name+"/").Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false
	}
	t.Fatalf("git check-ignore %s/: %v", name, err)
	return false
}

// TestDocumentsReferredToExist: every document a file of the repository
// names (README.md, docs/capacity.md) is there, found from
// the repository's root or from the folder of the file that names it.
func TestDocumentsReferredToExist(t *testing.T) {
	ref := regexp.MustCompile(`(?:^|[^\w./:-])((?:[\w.-]+/)*[\w-]+\.md|docs/[\w.-]*\w)\b`)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "results") {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".yaml", ".yml", ".sh", ".proto", ".js", ".c":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			name := m[1]
			_, errRoot := os.Stat(filepath.Join("../..", name))
			_, errHere := os.Stat(filepath.Join(filepath.Dir(path), name))
			if errRoot != nil && errHere != nil {
				t.Errorf("%s refers to %s, which the repository does not have", strings.TrimPrefix(path, "../../"), name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
