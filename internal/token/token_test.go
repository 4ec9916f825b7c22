package token_test

import (
	"strings"
	"testing"

	"github.com/coordd/coordd/internal/token"
)

func TestNew(t *testing.T) {
	seen := make(map[string]bool)
	for i := 0; i < 1000; i++ {
		tok := token.New()
		if len(tok) != token.Len {
			t.Fatalf("New() = %q: %d characters, want %d", tok, len(tok), token.Len)
		}
		if strings.Trim(tok, "0123456789abcdef") != "" {
			t.Fatalf("New() = %q: not lowercase hex", tok)
		}
		if !token.Valid(tok) {
			t.Fatalf("Valid(New()) = false for %q", tok)
		}
		if seen[tok] {
			t.Fatalf("New() returned %q twice", tok)
		}
		seen[tok] = true
	}
}

func TestValid(t *testing.T) {
	const ok = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		s    string
		want bool
	}{
		{"digits and a-f", ok, true},
		{"all zeros", strings.Repeat("0", 32), true},
		{"all f", strings.Repeat("f", 32), true},
		{"empty", "", false},
		{"31 characters", ok[:31], false},
		{"33 characters", ok + "a", false},
		{"64 characters", ok + ok, false},
		{"uppercase A-F", strings.ToUpper(ok), false},
		{"one uppercase", "A" + ok[1:], false},
		{"g", ok[:31] + "g", false},
		{"slash before 0", "/" + ok[1:], false},
		{"colon after 9", ":" + ok[1:], false},
		{"backquote before a", "`" + ok[1:], false},
		{"space", ok[:16] + " " + ok[17:], false},
		{"NUL", ok[:31] + "\x00", false},
		{"multi-byte of 32 bytes", strings.Repeat("é", 16), false},
		{"dashes (UUID form)", "01234567-89ab-cdef-0123-456789abcdef"[:32], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := token.Valid(tc.s); got != tc.want {
				t.Errorf("Valid(%q) = %v, want %v", tc.s, got, tc.want)
			}
		})
	}
}
