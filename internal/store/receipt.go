package store

import (
	"fmt"
	"strconv"
)

// A receipt names one claim of one message: the message ID, the attempt
// number (8 hex digits) and the claim's random token, 72 hex digits in all.
// The attempt is in the receipt so that Nack can back off by attempt without
// reading the message first; it cannot be forged, since a store accepts a
// receipt only if it equals the one it issued.

// ReceiptLen is the length of a receipt in characters.
const ReceiptLen = 32 + 8 + 32

// MakeReceipt builds the receipt of a claim.
func MakeReceipt(id string, attempt int, token string) string {
	return fmt.Sprintf("%s%08x%s", id, uint32(attempt), token)
}

// ParseReceipt splits a receipt into message ID and attempt; ok is false if
// receipt is not of the form MakeReceipt makes.
func ParseReceipt(receipt string) (id string, attempt int, ok bool) {
	if len(receipt) != ReceiptLen {
		return "", 0, false
	}
	for i := 0; i < len(receipt); i++ {
		c := receipt[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", 0, false
		}
	}
	n, err := strconv.ParseUint(receipt[32:40], 16, 32)
	if err != nil || n == 0 || n > 1<<31-1 {
		return "", 0, false
	}
	return receipt[:32], int(n), true
}

// ValidMessageID reports whether id has the form of a message ID: 32
// lowercase hex digits, as the queue makes them and receipts start with.
func ValidMessageID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
