package validate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/validate"
)

// check verifies that err is nil when ok, and otherwise a *FieldError that
// names field.
func check(t *testing.T, err error, ok bool, field string) {
	t.Helper()
	if ok {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return
	}
	if err == nil {
		t.Fatal("err = nil, want a *FieldError")
	}
	var fe *validate.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %T %v, want a *FieldError", err, err)
	}
	if fe.Field != field {
		t.Errorf("Field = %q, want %q", fe.Field, field)
	}
	if fe.Reason == "" {
		t.Error("Reason is empty")
	}
	if want := field + ": " + fe.Reason; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !validate.IsFieldError(err) {
		t.Error("IsFieldError = false")
	}
}

// labelCases hold for Name and Label alike, except the empty string.
var labelCases = []struct {
	name string
	s    string
	max  int
	ok   bool
}{
	{"ascii", "orders", 16, true},
	{"exactly max", strings.Repeat("a", 16), 16, true},
	{"max+1", strings.Repeat("a", 17), 16, false},
	{"max counts bytes: 3×é is 6 bytes", "ééé", 6, true},
	{"max counts bytes: 6 bytes over 5", "ééé", 5, false},
	{"punctuation and space", "a b/c:d.e-f_g", 64, true},
	{"NUL", "a\x00b", 16, false},
	{"newline", "a\nb", 16, false},
	{"tab", "a\tb", 16, false},
	{"DEL", "a\x7fb", 16, false},
	{"C1 NEL U+0085", "a\u0085b", 16, false},
	{"U+2028 is not a control character", "a\u2028b", 16, true},
	{"emoji", "lock-🔒", 16, true},
	{"right-to-left override U+202E", "a\u202eb", 16, false},
	{"left-to-right override U+202D", "a\u202db", 16, false},
	{"right-to-left isolate U+2067", "a\u2067b", 16, false},
	{"pop directional isolate U+2069", "a\u2069", 16, false},
	{"right-to-left mark U+200F", "\u200fa", 16, false},
	{"arabic letter mark U+061C", "a\u061c", 16, false},
	{"zero-width space U+200B", "ad\u200bmin", 16, false},
	{"zero-width joiner U+200D", "a\u200db", 16, false},
	{"word joiner U+2060", "a\u2060b", 16, false},
	{"byte order mark U+FEFF", "\ufeffa", 16, false},
	{"soft hyphen U+00AD", "a\u00adb", 16, false},
	{"tag character U+E0041", "a\U000e0041", 16, false},
	{"zero-width as the whole name", "\u200b", 16, false},
	{"combining accent (Mn) is fine", "e\u0301", 16, true},
	{"non-breaking space (Zs) is fine", "a\u00a0b", 16, true},
	{"invalid UTF-8", "a\xffb", 16, false},
	{"truncated UTF-8", "\xc3", 16, false},
	{"surrogate half", "\xed\xa0\x80", 16, false},
}

func TestName(t *testing.T) {
	for _, tc := range labelCases {
		t.Run(tc.name, func(t *testing.T) {
			check(t, validate.Name("name", tc.s, tc.max), tc.ok, "name")
		})
	}
	t.Run("empty", func(t *testing.T) {
		check(t, validate.Name("queue", "", 16), false, "queue")
	})
}

func TestLabel(t *testing.T) {
	for _, tc := range labelCases {
		t.Run(tc.name, func(t *testing.T) {
			check(t, validate.Label("owner", tc.s, tc.max), tc.ok, "owner")
		})
	}
	t.Run("empty", func(t *testing.T) {
		check(t, validate.Label("owner", "", 16), true, "owner")
	})
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		max  int
		ok   bool
	}{
		{"empty", "", 8, true},
		{"exactly max", strings.Repeat("x", 8), 8, true},
		{"max+1", strings.Repeat("x", 9), 8, false},
		{"multi-byte over max", "éééé", 7, false},
		{"newline and tab allowed", "line 1\n\tline 2", 64, true},
		{"NUL allowed", "a\x00b", 8, true},
		{"DEL and U+0085 allowed", "a\x7f\u0085", 8, true},
		{"invalid UTF-8", "a\xffb", 8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, validate.Text("failure.message", tc.s, tc.max), tc.ok, "failure.message")
		})
	}
}

func TestToken(t *testing.T) {
	valid := "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		s    string
		ok   bool
	}{
		{"valid", valid, true},
		{"empty", "", false},
		{"31 digits", valid[:31], false},
		{"33 digits", valid + "0", false},
		{"uppercase", strings.ToUpper(valid), false},
		{"non-hex g", "g" + valid[1:], false},
		{"space", " " + valid[1:], false},
		{"multi-byte", "é" + valid[2:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, validate.Token("token", tc.s), tc.ok, "token")
		})
	}
}

func TestDuration(t *testing.T) {
	const max = time.Hour
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{0, false},
		{-time.Second, false},
		{time.Microsecond, false},
		{validate.MinDuration - 1, false},
		{validate.MinDuration, true},
		{30 * time.Second, true},
		{max, true},
		{max + 1, false},
		{max + time.Second, false},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			check(t, validate.Duration("ttl", tc.d, max), tc.ok, "ttl")
		})
	}
}

func TestWait(t *testing.T) {
	const max = time.Minute
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{-1, false},
		{-time.Second, false},
		{0, true},
		{1, true},
		{time.Millisecond, true},
		{max, true},
		{max + 1, false},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			check(t, validate.Wait("wait", tc.d, max), tc.ok, "wait")
		})
	}
}

func TestBytes(t *testing.T) {
	const max = 4
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"nil", nil, true},
		{"empty", []byte{}, true},
		{"exactly max", make([]byte, max), true},
		{"max+1", make([]byte, max+1), false},
		{"binary is fine", []byte{0, 0xff, '\n', 0x7f}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, validate.Bytes("payload", tc.b, max), tc.ok, "payload")
		})
	}
}

func TestErrorf(t *testing.T) {
	err := validate.Errorf("limit.period", "is %v; the limit is %v", time.Hour, time.Minute)
	check(t, err, false, "limit.period")
	if got, want := err.Error(), "limit.period: is 1h0m0s; the limit is 1m0s"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestIsFieldError(t *testing.T) {
	fe := validate.Errorf("ttl", "is bad")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("ttl: is bad"), false},
		{"field error", fe, true},
		{"wrapped", fmt.Errorf("ratelimit.policies: %w", fe), true},
		{"joined", errors.Join(errors.New("x"), fe), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := validate.IsFieldError(tc.err); got != tc.want {
				t.Errorf("IsFieldError(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
