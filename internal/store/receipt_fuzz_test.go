package store_test

import (
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/coordd/coordd/internal/store"
)

// FuzzParseReceipt checks ParseReceipt against a naive statement of the
// receipt format on arbitrary strings, that an accepted receipt re-encodes
// identically, and that MakeReceipt round-trips through ParseReceipt for
// every ID, token and attempt. Seeds: testdata/fuzz/FuzzParseReceipt.
func FuzzParseReceipt(f *testing.F) {
	f.Fuzz(func(t *testing.T, receipt string, idBytes, tokBytes []byte, attempt int64) {
		// Any string: never panics, accepts exactly the receipts the naive
		// parser accepts, and an accepted one re-encodes identically.
		id, n, ok := store.ParseReceipt(receipt)
		wantID, wantN, wantOK := naiveParseReceipt(receipt)
		if id != wantID || n != wantN || ok != wantOK {
			t.Fatalf("ParseReceipt(%q) = %q, %d, %v; want %q, %d, %v", receipt, id, n, ok, wantID, wantN, wantOK)
		}
		if ok {
			if again := store.MakeReceipt(id, n, receipt[40:]); again != receipt {
				t.Fatalf("ParseReceipt(%q) = %q, %d: MakeReceipt gives %q", receipt, id, n, again)
			}
		}

		// MakeReceipt of a well-formed ID and token (any bytes, hex-encoded)
		// parses back; the attempt is written as a uint32, so it comes back
		// if that is in 1..MaxInt32, and the receipt is refused otherwise.
		id = hexToken(idBytes)
		tok := hexToken(tokBytes)
		r := store.MakeReceipt(id, int(attempt), tok)
		if len(r) != store.ReceiptLen || !strings.HasPrefix(r, id) || !strings.HasSuffix(r, tok) {
			t.Fatalf("MakeReceipt(%q, %d, %q) = %q", id, attempt, tok, r)
		}
		gotID, gotN, gotOK := store.ParseReceipt(r)
		a := uint32(attempt)
		if a >= 1 && a <= math.MaxInt32 {
			if !gotOK || gotID != id || gotN != int(a) {
				t.Fatalf("ParseReceipt(MakeReceipt(%q, %d, %q) = %q) = %q, %d, %v", id, attempt, tok, r, gotID, gotN, gotOK)
			}
		} else if gotOK {
			t.Fatalf("ParseReceipt(%q) accepted attempt %#x (from %d)", r, a, attempt)
		}
	})
}

// naiveParseReceipt: 72 lowercase hex digits, of which digits 33-40 are the
// attempt, which must be 1..2^31-1.
func naiveParseReceipt(r string) (string, int, bool) {
	if len(r) != 72 {
		return "", 0, false
	}
	attempt := 0
	for i := 0; i < len(r); i++ {
		d := strings.IndexByte("0123456789abcdef", r[i])
		if d < 0 {
			return "", 0, false
		}
		if i >= 32 && i < 40 {
			attempt = attempt*16 + d
		}
	}
	if attempt < 1 || attempt > 1<<31-1 {
		return "", 0, false
	}
	return r[:32], attempt, true
}

// hexToken makes a well-formed token of any bytes: the first 16, zero-padded,
// in lowercase hex.
func hexToken(b []byte) string {
	var t [16]byte
	copy(t[:], b)
	return hex.EncodeToString(t[:])
}
