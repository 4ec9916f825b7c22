package redis

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestReplyCodesMatchThePrelude checks that lua/prelude.lua names every
// reply code as reply.go does, with the same number.
func TestReplyCodesMatchThePrelude(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^local ((?:[A-Z_]+, )*[A-Z_]+) = ((?:-?\d+, )*-?\d+)$`)
	declared := map[string]int64{}
	for _, m := range decl.FindAllStringSubmatch(lua("prelude"), -1) {
		names, values := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
		if len(names) != len(values) {
			t.Fatalf("prelude: %q", m[0])
		}
		for i, n := range names {
			v, _ := strconv.ParseInt(values[i], 10, 64)
			declared[n] = v
		}
	}
	for name, v := range replyCodes {
		if got, ok := declared[name]; !ok || got != v {
			t.Errorf("prelude's %s = %d (declared: %v), reply.go's %d", name, got, ok, v)
		}
	}
	for name := range declared {
		if _, ok := replyCodes[name]; !ok {
			t.Errorf("prelude declares %s, which reply.go does not name", name)
		}
	}
}

// TestReplyDecoding checks that a short or mistyped reply is errCorrupt
// naming the script, and never a zero taken for an answer.
func TestReplyDecoding(t *testing.T) {
	sc := &script{name: "test_script"}
	cmd := func(v any) *redis.Cmd {
		c := redis.NewCmd(t.Context())
		c.SetVal(v)
		return c
	}
	r, err := replyOf(sc, cmd([]any{int64(codeOK), "owner", int64(7)}))
	if err != nil {
		t.Fatal(err)
	}
	if c, o, f := r.code(codeOK, codeNo), r.str(1), r.uint(2); c != codeOK || o != "owner" || f != 7 || r.done() != nil {
		t.Fatalf("decoded %d %q %d, %v", c, o, f, r.done())
	}
	for name, v := range map[string][]any{
		"short":        {int64(codeOK), "owner"},
		"mistyped":     {int64(codeOK), int64(3), int64(7)},
		"unknown code": {int64(5), "owner", int64(7)},
		"negative":     {int64(codeOK), "owner", int64(-7)},
	} {
		r, err := replyOf(sc, cmd(v))
		if err != nil {
			t.Fatal(err)
		}
		r.code(codeOK, codeNo)
		r.str(1)
		r.uint(2)
		if err := r.done(); !isBug(err) || !strings.Contains(err.Error(), "test_script") {
			t.Errorf("%s reply %v: %v, want errCorrupt naming the script", name, v, err)
		}
	}
	if _, err := replyOf(sc, cmd(int64(1))); !isBug(err) {
		t.Errorf("a scalar for an array: %v, want errCorrupt", err)
	}
	if _, err := intOf(sc, cmd([]any{})); !isBug(err) {
		t.Errorf("an array for an integer: %v, want errCorrupt", err)
	}
}
