package redis

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// TestHoldFields: a session's hold is keyed "kind:name", a name may contain
// ':', and a loss report carries the kind; a field or report with no kind,
// or an entry of a kind no holdKind handles, is errCorrupt (nothing could
// renew or drop it), never a hold of a made-up kind.
func TestHoldFields(t *testing.T) {
	f := holdField(store.HoldLock, "ns:a:b")
	if f != "lock:ns:a:b" {
		t.Fatalf("holdField = %q", f)
	}
	if k, n, err := splitHoldField(f); err != nil || k != store.HoldLock || n != "ns:a:b" {
		t.Fatalf("splitHoldField(%q) = %q, %q, %v", f, k, n, err)
	}
	for _, bad := range []string{"nokind", ":ns:a"} {
		if _, _, err := splitHoldField(bad); !isBug(err) {
			t.Errorf("splitHoldField(%q) = %v, want errCorrupt", bad, err)
		}
	}
	l, err := decodeReport("4", "1 42 lock:ns:a")
	if want := (store.LostHold{Kind: store.HoldLock, Name: "ns:a", Fence: 42, Reason: store.LostMaxHold, Seq: 4}); err != nil || l != want {
		t.Fatalf("decodeReport = %+v, %v; want %+v", l, err, want)
	}
	if _, err := decodeReport("4", "1 42 ns"); !isBug(err) {
		t.Errorf("a report with no kind: %v, want errCorrupt", err)
	}

	cmd := func(v any) *redis.Cmd {
		c := redis.NewCmd(t.Context())
		c.SetVal(v)
		return c
	}
	entry := encodeEntry(sessionEntry{token: token.New(), fence: 7})
	c, err := decodeClose(cmd([]any{int64(codeOK), "1", "lock:ns:a", entry}), true)
	if err != nil || !c.closing || !c.indexed || len(c.holds) != 1 || c.holds[0].kind != store.HoldLock || c.holds[0].name != "ns:a" || c.holds[0].fence != 7 {
		t.Fatalf("decodeClose = %+v, %v", c, err)
	}
	if _, err := decodeClose(cmd([]any{int64(codeOK), "", "nosuchkind:ns:a", entry}), true); !isBug(err) {
		t.Errorf("a hold of an unknown kind: %v, want errCorrupt", err)
	}
	if _, err := decodeRefresh(cmd([]any{int64(codeOK), int64(2), int64(1), "", int64(1), int64(1 << 40)})); !isBug(err) {
		t.Errorf("a refresh reply counting more reports than it has: %v, want errCorrupt", err)
	}
}
