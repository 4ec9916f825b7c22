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
// every ID, token and attempt. Seeds: the f.Add calls below (testdata/fuzz:
// only what the fuzzer found).
func FuzzParseReceipt(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add("0123456789abcdef0123456789abcdef00000000fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(0))                    // attempt_0
	f.Add("0123456789abcdef0123456789abcdeffffffffffedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(4294967295))           // attempt_all_f
	f.Add("0123456789abcdef0123456789abcdef7ffffffffedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(2147483647))           // attempt_max
	f.Add("0123456789abcdef0123456789abcdef80000000fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(2147483648))           // attempt_max_plus_1
	f.Add("0123456789abcdef0123456789abcdef00000000fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(-9223372036854775808)) // attempt_minint
	f.Add("0123456789abcdef0123456789abcdeffffffffffedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(-1))                   // attempt_negative
	f.Add("0123456789abcdef0123456789abcdef00000001fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(4294967297))           // attempt_wraps_to_1
	f.Add("", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                                                                                            // empty
	f.Add("", []byte(""), []byte(""), int64(2))                                                                                                                                                                          // empty_id_and_token_bytes
	f.Add("\xff123456789abcdef0123456789abcdef00000001fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                 // invalid_utf8
	f.Add("0123456789abcdef0123456789abcdef00000001fedcba9876543210fedcba98765432100", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                   // long_73
	f.Add("", []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), []byte("x"), int64(3))         // long_id_bytes
	f.Add("éééééééééééééééééééééééééééééééééééé", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                                                        // multibyte_72_bytes
	f.Add("\x00123456789abcdef0123456789abcdef00000001fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                 // nul
	f.Add("0123456789abcdef0123456789abcdef00000001fedcba9876543210fedcba987654321|", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                    // pipe
	f.Add("0123456789abcdef0123456789abcdef+0000001fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                    // plus_sign_in_attempt
	f.Add("0123456789abcdef0123456789abcdef00000001fedcba9876543210fedcba987654321", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                     // short_71
	f.Add("0123456789abcdef0123456789abcdef 0000001fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                    // space_in_attempt
	f.Add("fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                                                            // token_only
	f.Add("0123456789ABCDEF0123456789abcdef00000001fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                    // uppercase
	f.Add("0123456789abcdef0123456789abcdef00000001fedcba9876543210fedcba9876543210", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), []byte("\xfeܺ\x98vT2\x10\xfeܺ\x98vT2\x10"), int64(1))                    // valid_attempt_1
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
