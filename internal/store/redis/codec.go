package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// The values coordd stores in Redis that Go reads back, with their encodings.
// Scripts treat an encoded message as opaque; they read a session entry's
// token as its prefix.

// A session's holds are a hash from field to entry. The field is the hold's
// kind and name, "kind:name" (kinds never contain ':'; names may), so that
// the scripts need not know kinds: a loss report carries the field.

// holdField is the field of a hold of kind named name.
func holdField(kind store.HoldKind, name string) string { return string(kind) + ":" + name }

// splitHoldField reads a field holdField wrote.
func splitHoldField(field string) (store.HoldKind, string, error) {
	kind, name, ok := strings.Cut(field, ":")
	if !ok || kind == "" {
		return "", "", fmt.Errorf("%w: a session's hold field has no kind", errCorrupt)
	}
	return store.HoldKind(kind), name, nil
}

// sessionEntry is what a session's holds keep for one hold: the token it
// is held with, its fence, when its max hold ends (µs; 0 for none), and
// whether the binding is still pending (granted, but not yet confirmed to
// its caller: see acquire in holds.go). Encoded as "token fence holdUntil", with
// " p" after it while pending. Scripts read the token as the entry's first
// word, and the fence and holdUntil as the next two.
type sessionEntry struct {
	token     string
	fence     uint64
	holdUntil int64
	pending   bool
}

// errCorrupt marks a stored value coordd cannot read: a bug, not an outage.
var errCorrupt = errors.New("redis: corrupt record")

func encodeEntry(e sessionEntry) string {
	s := e.token + " " + strconv.FormatUint(e.fence, 10) + " " + strconv.FormatInt(e.holdUntil, 10)
	if e.pending {
		s += " p"
	}
	return s
}

// decodeEntry reads a session entry. Its error never quotes the entry,
// which holds a token.
func decodeEntry(s string) (sessionEntry, error) {
	f := strings.Split(s, " ")
	if (len(f) != 3 && (len(f) != 4 || f[3] != "p")) || !token.Valid(f[0]) {
		return sessionEntry{}, fmt.Errorf("%w: session entry of %d fields", errCorrupt, len(f))
	}
	fence, err1 := strconv.ParseUint(f[1], 10, 64)
	hold, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || hold < 0 {
		return sessionEntry{}, fmt.Errorf("%w: session entry with a bad number", errCorrupt)
	}
	return sessionEntry{token: f[0], fence: fence, holdUntil: hold, pending: len(f) == 4}, nil
}

// A loss report is "reason fence field" (lua/prelude.lua's lossReport; the
// field is the hold's, "kind:name"), stored under its sequence number.
func decodeReport(seq, s string) (store.LostHold, error) {
	n, err0 := strconv.ParseUint(seq, 10, 64)
	reason, rest, ok1 := strings.Cut(s, " ")
	fence, field, ok2 := strings.Cut(rest, " ")
	r, err1 := strconv.Atoi(reason)
	f, err2 := strconv.ParseUint(fence, 10, 64)
	if err0 != nil || err1 != nil || err2 != nil || !ok1 || !ok2 || n == 0 ||
		store.LossReason(r) < store.LostMaxHold || store.LossReason(r) > store.LostGone {
		return store.LostHold{}, fmt.Errorf("%w: loss report", errCorrupt)
	}
	kind, name, err := splitHoldField(field)
	if err != nil {
		return store.LostHold{}, err
	}
	return store.LostHold{Kind: kind, Name: name, Fence: f, Reason: store.LossReason(r), Seq: n}, nil
}

// A message is encoded as a version byte (1) and its payload; what changes
// while it is queued (attempt, deliver time, receipt) is kept beside it, in
// the queue's meta hash, for the scripts, in a record versioned alike
// (lua/queue_prelude.lua: a script that meets another version ends with
// errCorrupt).
const messageVersion = 1

func encodeMessage(payload []byte) string {
	return string(append([]byte{messageVersion}, payload...))
}

func decodeMessage(s string) (payload []byte, err error) {
	if len(s) < 1 || s[0] != messageVersion {
		return nil, fmt.Errorf("%w: message record", errCorrupt)
	}
	return []byte(s[1:]), nil
}
