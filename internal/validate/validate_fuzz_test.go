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
// field it was given (check, in validate_test.go). Seeds: testdata/fuzz.

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
	f.Fuzz(func(t *testing.T, field, s string, max int) {
		want := s != "" && naiveLabel(s, max)
		check(t, validate.Name(field, s, max), want, field)
	})
}

func FuzzLabel(f *testing.F) {
	f.Fuzz(func(t *testing.T, field, s string, max int) {
		check(t, validate.Label(field, s, max), naiveLabel(s, max), field)
	})
}

func FuzzText(f *testing.F) {
	f.Fuzz(func(t *testing.T, field, s string, max int) {
		check(t, validate.Text(field, s, max), len(s) <= max && naiveUTF8(s), field)
	})
}

func FuzzToken(f *testing.F) {
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
	f.Fuzz(func(t *testing.T, field string, d, max int64, n int) {
		dd, mm := time.Duration(d), time.Duration(max)
		check(t, validate.Duration(field, dd, mm), dd >= time.Millisecond && dd <= mm, field)
		check(t, validate.Wait(field, dd, mm), dd >= 0 && dd <= mm, field)
		n = n & (1<<12 - 1) // a payload's length; the bound may be anything
		check(t, validate.Bytes(field, make([]byte, n), int(max)), int64(n) <= max, field)
	})
}
