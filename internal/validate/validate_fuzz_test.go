package validate_test

import (
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/coordd/coordd/internal/validate"
)

// The fuzz targets check each rule against an independent, deliberately
// naive statement of it, and that every refusal is a *FieldError naming the
// field it was given (check, in validate_test.go). Seeds: the f.Add calls in
// each target (testdata/fuzz: only what the fuzzer found).

// naiveUTF8 reports whether s is valid UTF-8 without package utf8: converting
// to runes turns every invalid byte (and surrogate halves, overlong forms)
// into U+FFFD, so only a valid string survives the round trip unchanged.
func naiveUTF8(s string) bool { return string([]rune(s)) == s }

// naiveControl reports whether s has a control character: the C0 controls,
// DEL and the C1 controls (Unicode category Cc, U+0000-001F and U+007F-009F).
func naiveControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return true
		}
	}
	return false
}

// spoofing are the format characters that disguise text, listed by hand:
// the bidirectional marks, embeddings, overrides and isolates, the
// zero-width and invisible operators, the byte order mark, the soft hyphen
// and the tags.
var spoofing = [][2]rune{
	{0x00ad, 0x00ad}, {0x061c, 0x061c}, {0x180e, 0x180e}, {0x200b, 0x200f}, {0x202a, 0x202e},
	{0x2060, 0x2064}, {0x2066, 0x206f}, {0xfeff, 0xfeff}, {0xe0001, 0xe0001}, {0xe0020, 0xe007f},
}

// naiveFormat reports whether s has a format character (Unicode Cf): one of
// spoofing, or any other that unicode.Cf lists (the hand list must be a
// subset of it, which TestSpoofingIsCf checks).
func naiveFormat(s string) bool {
	for _, r := range s {
		for _, rg := range spoofing {
			if r >= rg[0] && r <= rg[1] {
				return true
			}
		}
		if unicode.Is(unicode.Cf, r) {
			return true
		}
	}
	return false
}

func TestSpoofingIsCf(t *testing.T) {
	for _, rg := range spoofing {
		for r := rg[0]; r <= rg[1]; r++ {
			if !unicode.Is(unicode.Cf, r) {
				t.Errorf("%U is in the hand list but not in Unicode Cf", r)
			}
		}
	}
}

func naiveLabel(s string, max int) bool {
	return len(s) <= max && naiveUTF8(s) && !naiveControl(s) && !naiveFormat(s)
}

func FuzzName(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add("name", "orders", 256)                 // ascii
	f.Add("name", "\xf4\x90\x80\x80", 16)        // beyond_max_rune
	f.Add("name", "\ufeffx", 16)                 // bom
	f.Add("name", "\u009f", 16)                  // c1_last
	f.Add("name", "a\u0085b", 16)                // c1_nel
	f.Add("name", "a\x7fb", 16)                  // del
	f.Add("name", "lock-🔒", 16)                  // emoji
	f.Add("name", "", 16)                        // empty
	f.Add("", "x", 1)                            // empty_field_name
	f.Add("name", "a\xffb", 16)                  // invalid_byte
	f.Add("name", strings.Repeat("a", 256), 256) // max_exact
	f.Add("name", "", -9223372036854775808)      // max_minint
	f.Add("name", "a", -1)                       // max_negative
	f.Add("name", strings.Repeat("a", 257), 256) // max_plus_1
	f.Add("name", "a", 0)                        // max_zero
	f.Add("name", "ééé", 6)                      // multibyte_at_max
	f.Add("name", "ééé", 5)                      // multibyte_over_max
	f.Add("name", "\u00a0", 16)                  // nbsp_not_control
	f.Add("name", "a\nb", 16)                    // newline
	f.Add("name", "a\x00b", 16)                  // nul
	f.Add("name", "\xc0\xaf", 16)                // overlong_slash
	f.Add("name", "�", 16)                       // replacement_char
	f.Add("name", "invoice\u202etxt.exe", 64)    // rlo_override
	f.Add("name", " ", 16)                       // space_only
	f.Add("name", "\xed\xa0\x80", 16)            // surrogate_half
	f.Add("name", "\t", 16)                      // tab
	f.Add("name", "a\U000e0041", 64)             // tag_char
	f.Add("name", "\xc3", 16)                    // truncated
	f.Add("name", "a\u2028b", 16)                // u2028_not_control
	f.Add("name", "ad\u200bmin", 64)             // zero_width_space
	f.Add("name", "👨\u200d👩", 64)                // zwj_sequence
	f.Fuzz(func(t *testing.T, field, s string, max int) {
		want := s != "" && naiveLabel(s, max)
		check(t, validate.Name(field, s, max), want, field)
	})
}

func FuzzLabel(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add("owner", "orders", 256)                 // ascii
	f.Add("owner", "\xf4\x90\x80\x80", 16)        // beyond_max_rune
	f.Add("owner", "\ufeffx", 16)                 // bom
	f.Add("owner", "\u009f", 16)                  // c1_last
	f.Add("owner", "a\u0085b", 16)                // c1_nel
	f.Add("owner", "a\x7fb", 16)                  // del
	f.Add("owner", "lock-🔒", 16)                  // emoji
	f.Add("owner", "", 16)                        // empty
	f.Add("owner", "a\xffb", 16)                  // invalid_byte
	f.Add("owner", strings.Repeat("a", 256), 256) // max_exact
	f.Add("owner", "", -9223372036854775808)      // max_minint
	f.Add("owner", "a", -1)                       // max_negative
	f.Add("owner", strings.Repeat("a", 257), 256) // max_plus_1
	f.Add("owner", "a", 0)                        // max_zero
	f.Add("owner", "ééé", 6)                      // multibyte_at_max
	f.Add("owner", "ééé", 5)                      // multibyte_over_max
	f.Add("owner", "\u00a0", 16)                  // nbsp_not_control
	f.Add("owner", "a\nb", 16)                    // newline
	f.Add("owner", "a\x00b", 16)                  // nul
	f.Add("owner", "\xc0\xaf", 16)                // overlong_slash
	f.Add("owner", "�", 16)                       // replacement_char
	f.Add("owner", "invoice\u202etxt.exe", 64)    // rlo_override
	f.Add("owner", " ", 16)                       // space_only
	f.Add("owner", "\xed\xa0\x80", 16)            // surrogate_half
	f.Add("owner", "\t", 16)                      // tab
	f.Add("owner", "a\U000e0041", 64)             // tag_char
	f.Add("owner", "\xc3", 16)                    // truncated
	f.Add("owner", "a\u2028b", 16)                // u2028_not_control
	f.Add("owner", "ad\u200bmin", 64)             // zero_width_space
	f.Add("owner", "👨\u200d👩", 64)                // zwj_sequence
	f.Fuzz(func(t *testing.T, field, s string, max int) {
		check(t, validate.Label(field, s, max), naiveLabel(s, max), field)
	})
}

func FuzzText(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add("failure.message", "orders", 256)                 // ascii
	f.Add("failure.message", "\xf4\x90\x80\x80", 16)        // beyond_max_rune
	f.Add("failure.message", "\ufeffx", 16)                 // bom
	f.Add("failure.message", "\u009f", 16)                  // c1_last
	f.Add("failure.message", "a\u0085b", 16)                // c1_nel
	f.Add("failure.message", "a\x7fb", 16)                  // del
	f.Add("failure.message", "lock-🔒", 16)                  // emoji
	f.Add("failure.message", "", 16)                        // empty
	f.Add("failure.message", "a\xffb", 16)                  // invalid_byte
	f.Add("failure.message", strings.Repeat("a", 256), 256) // max_exact
	f.Add("failure.message", "", -9223372036854775808)      // max_minint
	f.Add("failure.message", "a", -1)                       // max_negative
	f.Add("failure.message", strings.Repeat("a", 257), 256) // max_plus_1
	f.Add("failure.message", "a", 0)                        // max_zero
	f.Add("failure.message", "ééé", 6)                      // multibyte_at_max
	f.Add("failure.message", "ééé", 5)                      // multibyte_over_max
	f.Add("failure.message", "\u00a0", 16)                  // nbsp_not_control
	f.Add("failure.message", "a\nb", 16)                    // newline
	f.Add("failure.message", "a\x00b", 16)                  // nul
	f.Add("failure.message", "\xc0\xaf", 16)                // overlong_slash
	f.Add("failure.message", "�", 16)                       // replacement_char
	f.Add("failure.message", " ", 16)                       // space_only
	f.Add("failure.message", "\xed\xa0\x80", 16)            // surrogate_half
	f.Add("failure.message", "\t", 16)                      // tab
	f.Add("failure.message", "\xc3", 16)                    // truncated
	f.Add("failure.message", "a\u2028b", 16)                // u2028_not_control
	f.Fuzz(func(t *testing.T, field, s string, max int) {
		check(t, validate.Text(field, s, max), len(s) <= max && naiveUTF8(s), field)
	})
}

func FuzzToken(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add("session_id", "")                                                                         // empty
	f.Add("session_id", "\xffaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")                                      // invalid_utf8
	f.Add("session_id", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")                                        // long
	f.Add("session_id", "éééééééééééééééé")                                                         // multibyte_32
	f.Add("session_id", "gggggggggggggggggggggggggggggggg")                                         // non_hex
	f.Add("session_id", "\x00aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")                                      // nul
	f.Add("session_id", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") // receipt_length
	f.Add("session_id", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")                                          // short
	f.Add("session_id", " aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")                                         // space
	f.Add("session_id", "0123456789ABCDEF0123456789abcdef")                                         // uppercase
	f.Add("session_id", "0123456789abcdef0123456789abcdef")                                         // valid
	f.Fuzz(func(t *testing.T, field, s string) {
		want := len(s) == 32
		for i := 0; i < len(s); i++ {
			want = want && strings.IndexByte("0123456789abcdef", s[i]) >= 0
		}
		check(t, validate.Token(field, s), want, field)
	})
}

// FuzzDuration covers the rules for durations (Duration, Wait) and payloads
// (Bytes), whose bounds come from config.
func FuzzDuration(f *testing.F) {
	// Seeds, each named by what it tries.
	f.Add("ttl", int64(60000000000), int64(60000000000), 4095)              // max_exact
	f.Add("ttl", int64(5), int64(-5), 3)                                    // max_negative
	f.Add("ttl", int64(60000000001), int64(60000000000), 4096)              // max_plus_1
	f.Add("ttl", int64(0), int64(0), 0)                                     // max_zero
	f.Add("ttl", int64(9223372036854775807), int64(9223372036854775807), 0) // maxint
	f.Add("ttl", int64(1000000), int64(60000000000), 2)                     // min
	f.Add("ttl", int64(999999), int64(60000000000), 1)                      // min_minus_1
	f.Add("ttl", int64(-9223372036854775808), int64(60000000000), -1)       // minint
	f.Add("ttl", int64(-1), int64(60000000000), 5)                          // negative
	f.Add("ttl", int64(0), int64(60000000000), 0)                           // zero
	f.Fuzz(func(t *testing.T, field string, d, max int64, n int) {
		dd, mm := time.Duration(d), time.Duration(max)
		check(t, validate.Duration(field, dd, mm), dd >= time.Millisecond && dd <= mm, field)
		check(t, validate.Wait(field, dd, mm), dd >= 0 && dd <= mm, field)
		n = n & (1<<12 - 1) // a payload's length; the bound may be anything
		check(t, validate.Bytes(field, make([]byte, n), int(max)), int64(n) <= max, field)
	})
}
