package proto3

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite api/proto3 from api/proto")

// TestRenderingIsCurrent fails when a committed rendering differs from the
// rendering of its source, or a source has no rendering (or the other way
// round); -update rewrites them.
func TestRenderingIsCurrent(t *testing.T) {
	sources, err := filepath.Glob("../proto/coord/v1/*.proto")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no sources in api/proto/coord/v1: %v", err)
	}
	want := map[string]bool{}
	for _, src := range sources {
		name := filepath.Base(src)
		want[name] = true
		in, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Render("api/proto/coord/v1/"+name, in)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join("coord", "v1", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		have, err := os.ReadFile(dst)
		if err != nil {
			t.Errorf("%s has no rendering (go test ./api/proto3 -update): %v", src, err)
			continue
		}
		if !bytes.Equal(have, got) {
			t.Errorf("api/proto3/%s differs from the rendering of %s: run go test ./api/proto3 -update", dst, src)
		}
	}
	rendered, _ := filepath.Glob("coord/v1/*.proto")
	for _, r := range rendered {
		if !want[filepath.Base(r)] {
			t.Errorf("api/proto3/%s has no source in api/proto/coord/v1: remove it", r)
		}
	}
}

func TestRender(t *testing.T) {
	src := "// about the edition\n" + editionLine + "\n\npackage coord.v1;\n\n" + presenceLine + "\n" + utf8Line +
		"\noption go_package = \"x\";\n\n// A message. features.x in a comment is fine.\nmessage M {\n  string name = 1;\n  reserved 5;\n  reserved old_name, other;\n}\n"
	got, err := Render("a.proto", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	body := string(got)
	for _, want := range []string{"syntax = \"proto3\";\n\npackage coord.v1;\n\noption go_package", "message M {\n  string name = 1;\n  reserved 5;\n  reserved \"old_name\", \"other\";\n}\n", "Code generated from a.proto"} {
		if !strings.Contains(body, want) {
			t.Errorf("rendering lacks %q:\n%s", want, body)
		}
	}
	for _, gone := range []string{"edition =", "features.field_presence", "utf8_validation", "about the edition"} {
		if strings.Contains(body, gone) {
			t.Errorf("rendering keeps %q:\n%s", gone, body)
		}
	}

	for name, bad := range map[string]string{
		"a field's feature":   strings.Replace(src, "string name = 1;", "string name = 1 [features.field_presence = EXPLICIT];", 1),
		"no utf8 line":        strings.Replace(src, utf8Line+"\n", "", 1),
		"no presence line":    strings.Replace(src, presenceLine+"\n", "", 1),
		"another edition":     strings.Replace(src, editionLine, `edition = "2024";`, 1),
		"a file-wide feature": strings.Replace(src, utf8Line, utf8Line+"\noption features.enum_type = CLOSED;", 1),
	} {
		if _, err := Render("a.proto", []byte(bad)); err == nil {
			t.Errorf("%s: rendered, want an error", name)
		}
	}
}
