package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/coordd/coordd/internal/token"
)

// The values coordd stores in Redis that Go reads back, with their encodings.
// Scripts treat an encoded message as opaque; they read a session entry's
// token as its prefix.

// sessionEntry is what a session's lock set holds for one lock: the token it
// holds the lock with, the lock's fence, and when its max hold ends (µs; 0
// for none). Encoded as "token fence holdUntil".
type sessionEntry struct {
	token     string
	fence     uint64
	holdUntil int64
}

// errCorrupt marks a stored value coordd cannot read: a bug, not an outage.
var errCorrupt = errors.New("redis: corrupt record")

func encodeEntry(e sessionEntry) string {
	return e.token + " " + strconv.FormatUint(e.fence, 10) + " " + strconv.FormatInt(e.holdUntil, 10)
}

func decodeEntry(s string) (sessionEntry, error) {
	f := strings.Split(s, " ")
	if len(f) != 3 || !token.Valid(f[0]) {
		return sessionEntry{}, fmt.Errorf("%w: session entry %q", errCorrupt, s)
	}
	fence, err1 := strconv.ParseUint(f[1], 10, 64)
	hold, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || hold < 0 {
		return sessionEntry{}, fmt.Errorf("%w: session entry %q", errCorrupt, s)
	}
	return sessionEntry{token: f[0], fence: fence, holdUntil: hold}, nil
}

// A message is encoded as a version byte (1) and its payload; what changes
// while it is queued (attempt, deliver time, receipt) is kept beside it, in
// the queue's meta hash, for the scripts.
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
