// Package token makes and checks the random identifiers coordd hands out:
// lock tokens, session IDs, idempotency owner tokens, message IDs and claim
// tokens. Each is 128 random bits written as 32 lowercase hex digits.
package token

import (
	"crypto/rand"
	"encoding/hex"
)

// Len is the length of a token in characters.
const Len = 32

// New returns a fresh random token.
func New() string {
	var b [Len / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on an unusable source)
	return hex.EncodeToString(b[:])
}

// Valid reports whether s has the form of a token: 32 lowercase hex digits.
func Valid(s string) bool {
	if len(s) != Len {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
