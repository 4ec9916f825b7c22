package store_test

import (
	"math"
	"strings"
	"testing"

	"github.com/coordd/coordd/internal/store"
)

const (
	testID  = "0123456789abcdef0123456789abcdef"
	testTok = "fedcba9876543210fedcba9876543210"
)

func TestReceiptRoundTrip(t *testing.T) {
	for _, attempt := range []int{1, 2, 9, 10, 15, 16, 255, 1 << 16, math.MaxInt32 - 1, math.MaxInt32} {
		r := store.MakeReceipt(testID, attempt, testTok)
		if len(r) != store.ReceiptLen {
			t.Errorf("MakeReceipt(attempt %d) = %q: %d characters, want %d", attempt, r, len(r), store.ReceiptLen)
		}
		if !strings.HasPrefix(r, testID) || !strings.HasSuffix(r, testTok) {
			t.Errorf("MakeReceipt(attempt %d) = %q: want the ID first and the token last", attempt, r)
		}
		id, got, ok := store.ParseReceipt(r)
		if !ok || id != testID || got != attempt {
			t.Errorf("ParseReceipt(%q) = %q, %d, %v; want %q, %d, true", r, id, got, ok, testID, attempt)
		}
	}
}

func TestReceiptAttemptIsEightHexDigits(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		want    string
	}{
		{1, "00000001"},
		{255, "000000ff"},
		{math.MaxInt32, "7fffffff"},
	} {
		r := store.MakeReceipt(testID, tc.attempt, testTok)
		if got := r[32:40]; got != tc.want {
			t.Errorf("MakeReceipt(attempt %d) has attempt %q, want %q", tc.attempt, got, tc.want)
		}
	}
}

func TestParseReceiptRejects(t *testing.T) {
	valid := store.MakeReceipt(testID, 3, testTok)
	for _, tc := range []struct {
		name    string
		receipt string
	}{
		{"empty", ""},
		{"one short", valid[:store.ReceiptLen-1]},
		{"one long", valid + "0"},
		{"only an ID", testID},
		{"ID and token without attempt", testID + testTok},
		{"uppercase ID", strings.ToUpper(testID) + valid[32:]},
		{"uppercase token", valid[:40] + strings.ToUpper(testTok)},
		{"uppercase attempt", testID + "0000000A" + testTok},
		{"non-hex", "g" + valid[1:]},
		{"space", valid[:10] + " " + valid[11:]},
		{"sign in attempt", testID + "+0000001" + testTok},
		{"attempt 0", testID + "00000000" + testTok},
		{"attempt MaxInt32+1", testID + "80000000" + testTok},
		{"attempt MaxUint32", testID + "ffffffff" + testTok},
		{"multi-byte of the right length", strings.Repeat("é", store.ReceiptLen/2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if id, attempt, ok := store.ParseReceipt(tc.receipt); ok || id != "" || attempt != 0 {
				t.Errorf("ParseReceipt(%q) = %q, %d, %v; want \"\", 0, false", tc.receipt, id, attempt, ok)
			}
		})
	}
}
