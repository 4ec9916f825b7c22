package e2e

// TestReadmeTour runs the shell blocks of README.md's "A tour" and "Using a
// lock correctly" against a fresh daemon, as a newcomer would paste them,
// and compares what they print with the README's "# …" lines, so that the
// README cannot drift from what coordd does.
//
// The README's conventions, which this file is the definition of:
//   - the first block of "A tour" sets things up (builds grpcurl, defines
//     the grpcurl function and A); every block runs in its own bash after it,
//     with A=127.0.0.1:7070 replaced by the test daemon's address — the only
//     change made to the README's text;
//   - in a block, a line starting with "#" is output expected from the
//     commands before it: all of a block's output, in order, must match all
//     of its "#" lines;
//   - grpcurl's JSON is compared on one line ({"k": v, "k2": v2}), and its
//     "ERROR:" block as one line of its lines joined by single spaces;
//   - "…" in an expected line matches any text; a line that is only "…"
//     matches any number of output lines; text after three or more spaces is
//     a remark and is not compared.

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/daemontest"
)

// readmeBlock is one ```sh block of README.md.
type readmeBlock struct {
	section string
	line    int // of the opening fence, 1-based
	script  string
	want    []string // its "#" lines, remarks removed
}

func TestReadmeTour(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tour := shBlocks(t, string(readme), "## A tour")
	fenced := shBlocks(t, string(readme), "## Using a lock correctly")
	if len(tour) < 2 || len(fenced) < 1 {
		t.Fatalf("README.md: %d sh blocks in A tour and %d in Using a lock correctly; the test expects a setup block and more", len(tour), len(fenced))
	}
	setup := tour[0]
	if len(setup.want) != 0 {
		t.Fatalf("README.md:%d: the tour's first block sets up and prints nothing, but it has expected lines", setup.line)
	}
	const addrLine = "A=127.0.0.1:7070"
	if n := strings.Count(setup.script, addrLine+"\n"); n != 1 {
		t.Fatalf("README.md:%d: the setup block has %q %d times, want once", setup.line, addrLine, n)
	}

	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The setup block's grpcurl build, done first, so that its first-time
	// downloads are not taken for the block's output.
	build := exec.Command("go", "build", "-modfile=tools/go.mod", "-o", "bin/grpcurl", "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building grpcurl: %v\n%s", err, out)
	}

	in := startMemoryInstance(t, "A")
	prelude := strings.Replace(setup.script, addrLine+"\n", "A="+in.GRPCAddr+"\n", 1)
	for _, b := range append(tour, fenced...) {
		if strings.Contains(b.script, "psql") && !postgresReachable() {
			if os.Getenv("CI") != "" {
				t.Fatalf("README.md:%d needs PostgreSQL on 127.0.0.1:5432, which CI provides; it is unreachable", b.line)
			}
			t.Logf("README.md:%d: skipped, no PostgreSQL on 127.0.0.1:5432", b.line)
			continue
		}
		got := runBlock(t, root, prelude, b)
		if !matchLines(b.want, got) {
			t.Errorf("README.md:%d (%s): the output does not match the README\n--- README expects:\n%s\n--- printed:\n%s\n--- block:\n%s",
				b.line, b.section, strings.Join(b.want, "\n"), strings.Join(got, "\n"), b.script)
		}
	}
}

// TestReadmeCurlTour runs the curl tour of README.md's "HTTP/JSON API" as
// TestReadmeTour runs the gRPC one: against a fresh daemon started with
// the section's ```yaml block as its configuration file, the section's
// first ```sh block (which sets H and prints nothing) before each other
// block, with H=127.0.0.1:7071 replaced by the daemon's HTTP address.
// curl prints protobuf's JSON on one line, which is compared in the
// README's form (normalise).
func TestReadmeCurlTour(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## HTTP/JSON API"
	blocks := shBlocks(t, string(readme), heading)
	config := fencedBlock(t, string(readme), heading, "```yaml")
	if len(blocks) < 2 || config == "" {
		t.Fatalf("README.md's %s: %d sh blocks and a yaml block %q; the test expects a configuration, a setup block and more", heading, len(blocks), config)
	}
	setup := blocks[0]
	const addrLine = "H=127.0.0.1:7071"
	if len(setup.want) != 0 || strings.Count(setup.script, addrLine+"\n") != 1 {
		t.Fatalf("README.md:%d: the curl tour's first block sets %s once and prints nothing", setup.line, addrLine)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the curl tour needs curl (scripts/test.sh installs it)")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	in := startCoorddWith(t, daemontest.Options{Name: "A", Args: []string{"--store", "memory"}, Config: config})
	prelude := strings.Replace(setup.script, addrLine+"\n", "H="+in.HTTPAddr+"\n", 1)
	for _, b := range blocks[1:] {
		got := runBlock(t, root, prelude, b)
		if !matchLines(b.want, got) {
			t.Errorf("README.md:%d (%s): the output does not match the README\n--- README expects:\n%s\n--- printed:\n%s\n--- block:\n%s",
				b.line, b.section, strings.Join(b.want, "\n"), strings.Join(got, "\n"), b.script)
		}
	}
}

// fencedBlock returns the text of the first block opened by fence (such
// as "```yaml") in the README section headed heading, or "".
func fencedBlock(t *testing.T, readme, heading, fence string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "\n"+fence+"\n")
	if !ok {
		return ""
	}
	block, _, _ = strings.Cut(block, "\n```\n")
	return block + "\n"
}

// shBlocks returns the ```sh blocks of the README section headed heading.
func shBlocks(t *testing.T, readme, heading string) []readmeBlock {
	t.Helper()
	lines := strings.Split(readme, "\n")
	var blocks []readmeBlock
	in, found := false, false
	var cur *readmeBlock
	for i, l := range lines {
		switch {
		case cur != nil && l == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.script += l + "\n"
			if rest, ok := strings.CutPrefix(l, "#"); ok {
				rest = strings.TrimPrefix(rest, " ")
				if j := strings.Index(rest, "   "); j >= 0 {
					rest = rest[:j]
				}
				cur.want = append(cur.want, strings.TrimSpace(rest))
			}
		case strings.HasPrefix(l, "## "):
			in = l == heading || strings.HasPrefix(l, heading+":")
			found = found || in
		case in && l == "```sh":
			cur = &readmeBlock{section: heading, line: i + 1}
		}
	}
	if !found {
		t.Fatalf("README.md has no section %q", heading)
	}
	return blocks
}

// runBlock runs prelude and the block in one bash at the repository root
// and returns its output (stdout and stderr in the order written),
// normalised (see normalise).
func runBlock(t *testing.T, root, prelude string, b readmeBlock) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", prelude+b.script)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out // one pipe: the order is kept
	if err := cmd.Run(); err != nil && ctx.Err() != nil {
		t.Fatalf("README.md:%d: did not end in 3 minutes; printed:\n%s", b.line, out.String())
	}
	return normalise(out.String())
}

// normalise puts each of grpcurl's JSON objects on one line in the README's
// form, and so each JSON object printed on one line (curl's), and each
// "ERROR:" block on one line; other lines are kept, less trailing blanks.
func normalise(out string) []string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if out == "" {
		return nil
	}
	var res []string
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t\r")
		switch {
		case l == "{":
			var obj []string
			for ; i < len(lines); i++ {
				obj = append(obj, lines[i])
				if lines[i] == "}" {
					break
				}
			}
			res = append(res, oneLineJSON(strings.Join(obj, "\n")))
		case strings.HasPrefix(l, "{") && strings.HasSuffix(l, "}") && json.Valid([]byte(l)):
			res = append(res, oneLineJSON(l))
		case l == "ERROR:":
			parts := []string{l}
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], " ") {
				i++
				parts = append(parts, strings.Join(strings.Fields(lines[i]), " "))
			}
			res = append(res, strings.Join(parts, " "))
		default:
			res = append(res, l)
		}
	}
	return res
}

// oneLineJSON compacts JSON and puts a space after each ':' and ',' outside
// strings; JSON it cannot compact is returned as it is, to show in a failure.
func oneLineJSON(s string) string {
	var c bytes.Buffer
	if err := json.Compact(&c, []byte(s)); err != nil {
		return s
	}
	var b strings.Builder
	inString, escaped := false, false
	for _, r := range c.String() {
		b.WriteRune(r)
		switch {
		case escaped:
			escaped = false
		case inString && r == '\\':
			escaped = true
		case r == '"':
			inString = !inString
		case !inString && (r == ':' || r == ','):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// matchLines reports whether got matches want: a want line of only "…"
// matches any number of lines, and "…" in a line any text.
func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "…" {
		for k := 0; k <= len(got); k++ {
			if matchLines(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	parts := strings.Split(want[0], "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	return re.MatchString(got[0]) && matchLines(want[1:], got[1:])
}

// postgresReachable reports whether something listens on PostgreSQL's
// port on loopback, where the README's fenced-write block expects it.
func postgresReachable() bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:5432", time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func TestReadmeMatchLines(t *testing.T) {
	for _, c := range []struct {
		want, got []string
		ok        bool
	}{
		{nil, nil, true},
		{nil, []string{"x"}, false},
		{[]string{"…"}, nil, true},
		{[]string{"…"}, []string{"a", "b"}, true},
		{[]string{"…", "20"}, []string{"a", "b", "20"}, true},
		{[]string{"…", "20"}, []string{"a", "20", "b"}, false},
		{[]string{`{"a": "…"}`}, []string{`{"a": "x y"}`}, true},
		{[]string{`{"a": "…"}`}, []string{`{"b": "x"}`}, false},
		{[]string{"a.b"}, []string{"aXb"}, false}, // literal, not a pattern
		{[]string{"a"}, []string{"a", "b"}, false},
	} {
		if got := matchLines(c.want, c.got); got != c.ok {
			t.Errorf("matchLines(%q, %q) = %v, want %v", c.want, c.got, got, c.ok)
		}
	}
	if got, want := oneLineJSON("{\n  \"a\": \"x,y: z\",\n  \"b\": [\n    1,\n    2\n  ]\n}"), `{"a": "x,y: z", "b": [1, 2]}`; got != want {
		t.Errorf("oneLineJSON = %s, want %s", got, want)
	}
}
