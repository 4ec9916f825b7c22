package redis

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

// Fuzz targets of the values coordd writes to Redis and reads back in Go
// (codec.go). Seeds: the f.Add calls (testdata/fuzz: only what the fuzzer
// found). The values the Lua scripts write (idempotency records, queue meta)
// are fuzzed in records_fuzz_test.go and checked on the Cluster too in
// luarecords_test.go.

// FuzzSessionEntry: decodeEntry never panics and accepts exactly what a
// naive parser accepts; an accepted entry re-encodes to the same string
// unless its numbers were written unusually ("007", "+5", "-0", which
// decodeEntry tolerates and encodeEntry never writes); and every entry
// encodeEntry writes decodes to itself, or, if it has no valid token or a
// negative hold, is refused.
func FuzzSessionEntry(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add("0123456789abcdef0123456789abcdef  1 2", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                     // double_space
	f.Add("", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                                                          // empty
	f.Add("0123456789abcdef0123456789abcdef  ", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                        // empty_numbers
	f.Add("", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", true, uint64(0), int64(0))                                                                            // encode_empty_token
	f.Add("", []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), "", false, uint64(18446744073709551615), int64(9223372036854775807))                    // encode_max
	f.Add("", []byte(""), "", false, uint64(0), int64(-9223372036854775808))                                                                                                      // encode_minint_hold
	f.Add("", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(1), int64(-1))                                                                          // encode_negative_hold
	f.Add("", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "0123456789abcdef 123456789abcdef", true, uint64(1), int64(1))                                            // encode_token_with_space
	f.Add("0123456789abcdef0123456789abcdef 18446744073709551616 0", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                   // fence_overflow
	f.Add("0123456789abcdef0123456789abcdef 1 2 3", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                    // four_fields
	f.Add("0123456789abcdef0123456789abcdef 0x10 2", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                   // hex_number
	f.Add("0123456789abcdef0123456789abcdef 1 9223372036854775808", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                    // hold_overflow
	f.Add("0123456789abcdef0123456789abcdef 1 \xff", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                   // invalid_utf8
	f.Add("0123456789abcdef0123456789abcdef 007 0009", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                 // leading_zeros
	f.Add("0123456789abcdef0123456789abcdef 18446744073709551615 9223372036854775807", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0)) // max_fence_and_hold
	f.Add("0123456789abcdef0123456789abcdef 1 -0", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                     // minus_zero_hold
	f.Add("0123456789abcdef0123456789abcdef 1 -1", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                     // negative_hold
	f.Add("0123456789abcdef0123456789abcdef 1\x00 2", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                  // nul
	f.Add("0123456789abcdef0123456789abcdef +1 5", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                     // plus_fence
	f.Add("0123456789abcdef0123456789abcdef 1 +5", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                     // plus_hold
	f.Add("0123456789abcdef0123456789abcde 1 2", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                       // short_token
	f.Add("0123456789abcdef0123456789abcdef\t1\t2", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                    // tab
	f.Add("0123456789abcdef0123456789abcdef 1 2 ", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                     // trailing_space
	f.Add("0123456789abcdef0123456789abcdef 1", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                        // two_fields
	f.Add("0123456789abcdef0123456789abcdef 1_000 2", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                  // underscore
	f.Add("0123456789ABCDEF0123456789abcdef 1 2", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                      // uppercase_token
	f.Add("0123456789abcdef0123456789abcdef 42 0", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                                     // valid
	f.Add("0123456789abcdef0123456789abcdef 1 1800000000000000", []byte("\x01#Eg\x89\xab\xcd\xef\x01#Eg\x89\xab\xcd\xef"), "", false, uint64(42), int64(0))                       // valid_hold
	f.Fuzz(func(t *testing.T, s string, tokBytes []byte, rawTok string, useRaw bool, fence uint64, hold int64) {
		e, err := decodeEntry(s)
		want, canonical, wantOK := naiveDecodeEntry(s)
		switch {
		case wantOK != (err == nil):
			t.Fatalf("decodeEntry(%q) = %+v, %v; naive parser accepts: %v", s, e, err, wantOK)
		case err != nil:
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("decodeEntry(%q): error %v does not wrap errCorrupt", s, err)
			}
			if e != (sessionEntry{}) {
				t.Fatalf("decodeEntry(%q) refused it but returned %+v", s, e)
			}
		case e != want:
			t.Fatalf("decodeEntry(%q) = %+v, want %+v", s, e, want)
		default:
			again := encodeEntry(e)
			if (again == s) != canonical {
				t.Fatalf("decodeEntry(%q) = %+v, re-encoded as %q (canonical input: %v)", s, e, again, canonical)
			}
			if e2, err := decodeEntry(again); err != nil || e2 != e {
				t.Fatalf("decodeEntry(encodeEntry(%+v) = %q) = %+v, %v", e, again, e2, err)
			}
		}

		tok := rawTok
		if !useRaw {
			var b [16]byte
			copy(b[:], tokBytes)
			tok = hex.EncodeToString(b[:])
		}
		in := sessionEntry{token: tok, fence: fence, holdUntil: hold}
		enc := encodeEntry(in)
		out, err := decodeEntry(enc)
		if naiveToken(tok) && hold >= 0 {
			if err != nil || out != in {
				t.Fatalf("decodeEntry(encodeEntry(%+v) = %q) = %+v, %v", in, enc, out, err)
			}
		} else if err == nil {
			t.Fatalf("encodeEntry(%+v) = %q, which decodes to %+v: want it refused", in, enc, out)
		}
	})
}

// FuzzMessageRecord: decodeMessage never panics and accepts exactly the
// strings that start with the version byte; decodeMessage(encodeMessage(p))
// is p, byte for byte, for any payload, which encodeMessage leaves alone.
func FuzzMessageRecord(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add("\x01hello", []byte("hello"))                                           // ascii
	f.Add("\x01\x00\xff\x01", []byte("\x00\xff\x01\x00"))                         // binary
	f.Add("\x01\r\n", []byte("$3\r\nfoo\r\n"))                                    // crlf
	f.Add("", []byte(""))                                                         // empty
	f.Add("\x01\xc3", []byte("\xed\xa0\x80"))                                     // invalid_utf8
	f.Add("\x01"+strings.Repeat("x", 4096), []byte(strings.Repeat("\x00", 4096))) // large
	f.Add("\x01%d+|(.*)$", []byte("|||%%"))                                       // lua_pattern_chars
	f.Add("\x010000000000000001|1|5|0|0|", []byte("0000000000000001|1|5|0|0|"))   // meta_like
	f.Add("\x00abc", []byte("abc"))                                               // version_0
	f.Add("\x02abc", []byte("\x00"))                                              // version_2
	f.Add("\x01", []byte(""))                                                     // version_only
	f.Fuzz(func(t *testing.T, s string, payload []byte) {
		p, err := decodeMessage(s)
		if ok := len(s) > 0 && s[0] == 1; ok != (err == nil) {
			t.Fatalf("decodeMessage(%q) = %q, %v", s, p, err)
		}
		if err != nil {
			if !errors.Is(err, errCorrupt) || p != nil {
				t.Fatalf("decodeMessage(%q) = %q, %v: want nil and errCorrupt", s, p, err)
			}
		} else if string(p) != s[1:] || encodeMessage(p) != s {
			t.Fatalf("decodeMessage(%q) = %q; encodeMessage of it = %q", s, p, encodeMessage(p))
		}

		payload = bytes.Clone(payload) // the test scribbles on it below; never on the fuzzer's
		orig := bytes.Clone(payload)
		enc := encodeMessage(payload)
		if !bytes.Equal(payload, orig) {
			t.Fatalf("encodeMessage changed its argument: %q, was %q", payload, orig)
		}
		got, err := decodeMessage(enc)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("decodeMessage(encodeMessage(%q) = %q) = %q, %v", payload, enc, got, err)
		}
		if len(payload) > 0 {
			payload[0]++ // the record must not share the caller's bytes
			if !bytes.Equal(got, orig) {
				t.Fatalf("decoded payload changed with its source: %q, want %q", got, orig)
			}
		}
	})
}

func naiveToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune("0123456789abcdef", rune(s[i])) {
			return false
		}
	}
	return true
}

// naiveDecodeEntry parses "token fence holdUntil" by hand: exactly two
// spaces; a token; fence decimal digits up to MaxUint64; holdUntil decimal
// digits with an optional sign, 0 to MaxInt64. canonical: the numbers are
// written as encodeEntry writes them (no sign, no leading zeros).
func naiveDecodeEntry(s string) (e sessionEntry, canonical, ok bool) {
	f := strings.Split(s, " ")
	if len(f) != 3 || !naiveToken(f[0]) {
		return sessionEntry{}, false, false
	}
	fence, ok1 := naiveDecimal(f[1], false, new(big.Int).SetUint64(math.MaxUint64))
	hold, ok2 := naiveDecimal(f[2], true, big.NewInt(math.MaxInt64))
	if !ok1 || !ok2 || hold.Sign() < 0 {
		return sessionEntry{}, false, false
	}
	canonical = plainDecimal(f[1]) && plainDecimal(f[2])
	return sessionEntry{token: f[0], fence: fence.Uint64(), holdUntil: hold.Int64()}, canonical, true
}

func naiveDecimal(s string, signed bool, max *big.Int) (*big.Int, bool) {
	digits := s
	if signed && (strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-")) {
		digits = s[1:]
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return nil, false
	}
	v, _ := new(big.Int).SetString(s, 10)
	// Below the signed minimum never matters here: a negative hold is refused.
	if v.Cmp(max) > 0 || (signed && v.Cmp(big.NewInt(math.MinInt64)) < 0) {
		return nil, false
	}
	return v, true
}

func plainDecimal(s string) bool { return s == "0" || (s != "" && s[0] >= '1' && s[0] <= '9') }
