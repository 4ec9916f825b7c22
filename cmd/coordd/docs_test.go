package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
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

// TestDocumentsNameRealFiles: every file or folder of the repository that a
// document (README.md, GUARANTEES.md, docs/*.md and the other Markdown
// files) names in code spans or links exists. A name is looked up from the
// repository's root, from the document's folder, or as the tail of a path
// in the repository ("holds.go", "lua/hold_prelude.lua"); a name without
// a file's extension counts only if it starts with a folder at the
// repository's root ("internal/hold"). Names in a
// table's "new files" column (docs/adding-a-primitive.md's walks of files
// to be written) and CHANGELOG.md (which names what was removed) are left
// out, as are globs, placeholders and other projects' paths.
func TestDocumentsNameRealFiles(t *testing.T) {
	files, dirs := repoPaths(t)
	span := regexp.MustCompile("`([^`\n]+)`|\\]\\(([^)#\\s]+)")
	pathLike := regexp.MustCompile(`^[\w.-]+(/[\w.-]+)*/?$`)
	fileExt := regexp.MustCompile(`\.(go|lua|md|proto|sh|ya?ml|js|py|json|txt|toml|mod|png)$`)
	n := 0
	for _, doc := range files {
		if filepath.Ext(doc) != ".md" || doc == "CHANGELOG.md" || strings.Contains(doc, "node_modules/") || strings.HasPrefix(doc, "bench/results/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range mdLinesOutsideNewFiles(string(b)) {
			for _, m := range span.FindAllStringSubmatch(line, -1) {
				name := strings.TrimPrefix(m[1]+m[2], "./")
				if !pathLike.MatchString(name) || strings.HasPrefix(name, ".") || (!fileExt.MatchString(name) && !(strings.Contains(strings.TrimSuffix(name, "/"), "/") && dirs[strings.Split(name, "/")[0]])) {
					continue // not a path, or a folder of another project
				}
				n++
				if !repoHas(files, dirs, path.Join(path.Dir(doc), name), strings.TrimSuffix(name, "/")) {
					t.Errorf("%s names %s, which the repository does not have", doc, name)
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("found only %d names in the documents: the pattern is broken", n)
	}
}

// mdLinesOutsideNewFiles returns a Markdown text's lines, with the cells of
// tables' "new files" columns blanked.
func mdLinesOutsideNewFiles(text string) []string {
	lines := strings.Split(text, "\n")
	skip := -1
	for i, l := range lines {
		if !strings.HasPrefix(l, "|") {
			skip = -1
			continue
		}
		cells := strings.Split(l, "|")
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|---") {
			skip = -1
			for j, c := range cells {
				if strings.TrimSpace(c) == "new files" {
					skip = j
				}
			}
			continue
		}
		if skip > 0 && skip < len(cells) {
			cells[skip] = ""
			lines[i] = strings.Join(cells, "|")
		}
	}
	return lines
}

// repoHas tells whether the repository has a file or folder at one of the
// paths, or one whose path ends with the last of them.
func repoHas(files []string, dirs map[string]bool, paths ...string) bool {
	for _, p := range paths {
		if dirs[p] || slices.Contains(files, p) {
			return true
		}
	}
	tail := "/" + paths[len(paths)-1]
	for _, f := range files {
		if strings.HasSuffix(f, tail) {
			return true
		}
	}
	for d := range dirs {
		if strings.HasSuffix(d, tail) {
			return true
		}
	}
	return false
}

// repoPaths lists the repository's files and folders, as git knows them
// (tracked and new, not ignored), relative to its root.
func repoPaths(t *testing.T) (files []string, dirs map[string]bool) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	dirs = map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, err := os.Stat(filepath.Join("../..", f)); err != nil {
			continue // deleted in the work tree
		}
		files = append(files, f)
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return files, dirs
}

// TestNoHistoryInCode keeps the project's history (its issue numbers,
// design notes, milestones) out of code, scripts and documents: they say
// what is, and CHANGELOG.md and the commit log say how it came to be.
// Recorded benchmark results (bench/results) are data of their day.
func TestNoHistoryInCode(t *testing.T) {
	files, _ := repoPaths(t)
	history := regexp.MustCompile(`(?i)\bissues? ?#?\d+\b|\bdesign-\d+\b|\bgoals\d+\b|\bmilestones?\b`)
	self := "cmd/coordd/docs_test.go"
	for _, f := range files {
		switch {
		case f == "CHANGELOG.md", f == self, strings.HasPrefix(f, "bench/results/"), strings.Contains(f, "node_modules/"):
			continue
		}
		switch path.Ext(f) {
		case ".go", ".lua", ".md", ".sh", ".yaml", ".yml", ".proto", ".js", ".ts", ".py", ".toml", ".json":
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := history.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: say what is, not when it came", f, i+1, m)
			}
		}
	}
}
