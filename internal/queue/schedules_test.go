package queue

import (
	"strings"
	"testing"
	"time"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct{ spec, tz, field string }{
		{"*/5 * * * *", "", ""},
		{"0 30 9 * * MON-FRI", "Europe/Paris", ""},
		{"@daily", "America/New_York", ""},
		{"@every 1s", "", ""},
		{"@every 90s", "", ""},
		{"@every 999ms", "", "spec"},
		{"@every 1500ms", "", "spec"},
		{"@every", "", "spec"},
		{"* * *", "", "spec"},
		{"61 * * * *", "", "spec"},
		{"0 0 30 2 *", "", "spec"}, // never fires
		{"CRON_TZ=UTC * * * * *", "", "spec"},
		{"* * * * *", "Mars/Olympus", "time_zone"},
		{"* * * * *", "Local", "time_zone"},
	} {
		_, err := parseSpec(tc.spec, tc.tz)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%q in %q: %v", tc.spec, tc.tz, err)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
			t.Errorf("%q in %q: %v, want an error naming %s", tc.spec, tc.tz, err, tc.field)
		}
	}
}

// TestEveryIsAlignedToTheEpoch: every instance computes the same ticks,
// whole multiples of the duration since the Unix epoch.
func TestEveryIsAlignedToTheEpoch(t *testing.T) {
	tk, _ := parseSpec("@every 7s", "")
	at := time.Unix(1_799_999_998, 500) // 1,799,999,999 = 7 × 257,142,857
	if got, want := tk.Next(at), time.Unix(1_799_999_999, 0); !got.Equal(want) {
		t.Fatalf("Next(%v) = %v, want %v, a multiple of 7s since the epoch", at, got, want)
	}
	if got := tk.Next(time.Unix(14, 0)); !got.Equal(time.Unix(21, 0)) {
		t.Fatalf("Next at a tick = %v, want the one after", got)
	}
}

// TestCronInTimeZone: a cron spec ticks by the wall clock of its zone.
func TestCronInTimeZone(t *testing.T) {
	tk, err := parseSpec("0 9 * * *", "Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	got := tk.Next(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)) // 09:00 in Tokyo
	if want := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next = %v, want %v (09:00 JST)", got.UTC(), want)
	}
}

// TestDueTicks: ticks missed within the catch-up window are each due;
// after a longer gap (every instance was down), only the latest is, and
// the others are counted missed.
func TestDueTicks(t *testing.T) {
	tk, _ := parseSpec("@every 1s", "")
	last := time.Unix(1000, 0)
	ticks, missed := dueTicks(tk, last, last.Add(3500*time.Millisecond))
	if len(ticks) != 3 || missed != 0 || !ticks[0].Equal(time.Unix(1001, 0)) || !ticks[2].Equal(time.Unix(1003, 0)) {
		t.Fatalf("3.5s after: %v, %d missed; want 1001, 1002, 1003", ticks, missed)
	}
	ticks, missed = dueTicks(tk, last, last.Add(30*time.Second))
	if len(ticks) != 1 || !ticks[0].Equal(time.Unix(1030, 0)) || missed != 29 {
		t.Fatalf("30s after: %v, %d missed; want 1030 alone, 29 missed", ticks, missed)
	}
	ticks, missed = dueTicks(tk, last, last.Add(48*time.Hour))
	if len(ticks) != 1 || !ticks[0].Equal(last.Add(48*time.Hour)) || missed != maxCatchUp-1 {
		t.Fatalf("two days after: %v, %d missed; want the latest tick, %d counted", ticks, missed, maxCatchUp-1)
	}
	if ticks, _ := dueTicks(tk, last, last.Add(999*time.Millisecond)); len(ticks) != 0 {
		t.Fatalf("before the next tick: %v", ticks)
	}
	daily, _ := parseSpec("0 0 * * *", "")
	day := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	ticks, missed = dueTicks(daily, day.Add(-72*time.Hour), day.Add(time.Hour))
	if len(ticks) != 1 || !ticks[0].Equal(day) || missed != 2 {
		t.Fatalf("daily, 3 days down: %v, %d missed; want %v, 2 missed", ticks, missed, day)
	}
}

func TestLatestTick(t *testing.T) {
	yearly, _ := parseSpec("0 0 1 1 *", "")
	got, err := latestTick(yearly, time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	if err != nil || !got.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("latestTick = %v, %v", got, err)
	}
}
