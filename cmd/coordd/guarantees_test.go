package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGuaranteesNameRealTests keeps GUARANTEES.md honest: every test it
// names as backing a guarantee (a Test or Fuzz function, or a subtest of the
// conformance suite written "storetest Group/Name") exists.
func TestGuaranteesNameRealTests(t *testing.T) {
	doc, err := os.ReadFile("../../GUARANTEES.md")
	if err != nil {
		t.Fatal(err)
	}
	var sources strings.Builder
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	src := sources.String()

	funcs := regexp.MustCompile(`\b(?:Test|Fuzz)[A-Z]\w*`).FindAllString(string(doc), -1)
	if len(funcs) < 50 {
		t.Fatalf("GUARANTEES.md names %d tests; the parse must be broken", len(funcs))
	}
	for _, name := range funcs {
		if !strings.Contains(src, "func "+name+"(") {
			t.Errorf("GUARANTEES.md names %s, which is not a test function in the repository", name)
		}
	}

	// storetest subtests: "storetest Locks/FenceFloor", and the names that
	// follow it in the same backquoted list: `Locks/FenceMonotonic`.
	subs := regexp.MustCompile("`(?:storetest )?(Locks|Holds|Elections|Sessions|Limits|Idempotency|Queues|Subscribe|Residue|Policies)/(\\w+)`").FindAllStringSubmatch(string(doc), -1)
	if len(subs) < 20 {
		t.Fatalf("GUARANTEES.md names %d conformance subtests; the parse must be broken", len(subs))
	}
	for _, m := range subs {
		if !strings.Contains(src, `{"`+m[2]+`", `) {
			t.Errorf("GUARANTEES.md names conformance subtest %s/%s, which internal/store/storetest does not define", m[1], m[2])
		}
	}
}
