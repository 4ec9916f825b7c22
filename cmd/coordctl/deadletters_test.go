package main

import (
	"regexp"
	"strings"
	"testing"
)

// dead-letters pages through a queue's dead letters, redrive --id moves
// named ones, and purge deletes the rest, only with --yes.
func TestDeadLettersRedriveByIDAndPurge(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	var ids []string
	for _, p := range []string{"first", "second", "third"} {
		r := c.run("enqueue", "q", "--max-attempts", "1", p)
		id := regexp.MustCompile(`message_id=(\S+)`).FindStringSubmatch(r.stdout)
		if id == nil {
			t.Fatalf("enqueue: %v", r)
		}
		ids = append(ids, id[1])
		receipt := receiptRE.FindStringSubmatch(c.run("claim", "q").stdout)
		if receipt == nil {
			t.Fatal("claim: no message")
		}
		want(t, c.run("nack", "q", receipt[3]), 0, "dead-lettered", "")
	}
	r := c.run("dead-letters", "q", "--page-size", "2", "--preview", "3")
	want(t, r, 0, "message_id="+ids[0]+" attempts=1 size=5 ", "")
	if !strings.Contains(r.stdout, `preview="fir"`) || strings.Contains(r.stdout, ids[2]) {
		t.Errorf("first page: %q, want the first two with 3-byte previews", r.stdout)
	}
	tok := regexp.MustCompile(`(?m)^next_page_token=(\S+)$`).FindStringSubmatch(r.stdout)
	if tok == nil {
		t.Fatalf("first page without a next page token: %q", r.stdout)
	}
	r = c.run("dead-letters", "q", "--page-size", "2", "--page-token", tok[1])
	want(t, r, 0, "message_id="+ids[2], "")
	if strings.Contains(r.stdout, "next_page_token") {
		t.Errorf("last page has a next page token: %q", r.stdout)
	}
	want(t, c.run("dead-letters", "q", "--page-token", "nope"), 1, "", "page_token")
	want(t, c.run("redrive", "q", "--id", ids[1], "--id", "0123456789abcdef0123456789abcdef"), 0, "moved=1", "")
	want(t, c.run("redrive", "q", "--id", ids[1], "--max", "3"), 2, "", "--max and --id")
	want(t, c.run("purge", "q"), 2, "", "add --yes")
	want(t, c.run("purge", "q", "--yes", "--max", "1"), 0, "purged=1 remaining=1", "")
	want(t, c.run("purge", "q", "--yes"), 0, "purged=1 remaining=0", "")
	want(t, c.run("dead-letters", "q"), 0, "", "no dead letters")
	want(t, c.run("stats", "q"), 0, "ready=1 delayed=0 in_flight=0 dead=0", "")
}
