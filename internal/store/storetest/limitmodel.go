package storetest

import (
	"math"
	"sort"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// limitModel is the specification in store/ratelimit.go, transcribed in the
// order it is written there, for one key under one Limit. The suite compares
// every decision of a backend with it. Times are Unix microseconds.
type limitModel struct {
	lim     store.Limit
	p, l, c int64 // P, L, C
	// Fixed and sliding window: the window of cur, its count, and the
	// count of the window before it.
	win, cur, prev int64
	// Sliding log, oldest first.
	log []logEntry
	// Buckets (GCRA).
	tat    int64
	hasTat bool
}

type logEntry struct{ t, c int64 }

func newLimitModel(lim store.Limit) *limitModel {
	return &limitModel{lim: lim, p: lim.Period.Microseconds(), l: lim.Limit, c: lim.Capacity(), win: math.MinInt64}
}

func usec(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// allow decides a call of cost c at now, and records it if allowed and not
// a peek.
func (m *limitModel) allow(now, c int64, peek bool) store.Decision {
	switch m.lim.Algorithm {
	case store.FixedWindow:
		return m.fixed(now, c, peek)
	case store.SlidingWindow:
		return m.sliding(now, c, peek)
	case store.SlidingLog:
		return m.slidingLog(now, c, peek)
	default:
		return m.gcra(now, c, peek)
	}
}

// lifetime is when the state may be dropped (store/ratelimit.go): until
// then a backend must keep it; MaxInt64 without state.
func (m *limitModel) lifetime() int64 {
	switch {
	case m.lim.Algorithm == store.FixedWindow || m.lim.Algorithm == store.SlidingWindow:
		if m.win != math.MinInt64 {
			return (m.win + 2) * m.p
		}
	case m.lim.Algorithm == store.SlidingLog:
		if len(m.log) > 0 {
			return m.log[len(m.log)-1].t + m.p
		}
	case m.hasTat:
		return m.tat
	}
	return math.MaxInt64
}

// window is the current window at now: now's, or the stored one if it is
// later (the clock stepped back).
func (m *limitModel) window(now int64) int64 { return max(now/m.p, m.win) }

func (m *limitModel) fixed(now, c int64, peek bool) store.Decision {
	w := m.window(now)
	n := int64(0)
	if m.win == w {
		n = m.cur
	}
	d := store.Decision{Allowed: n+c <= m.l}
	after := n
	if d.Allowed {
		after += c
	} else {
		d.RetryAfter = usec((w+1)*m.p - now)
	}
	d.Remaining = m.l - after
	if after > 0 {
		d.ResetAfter = usec((w+1)*m.p - now)
	}
	if d.Allowed && !peek {
		m.win, m.cur = w, after
	}
	return d
}

// counts returns the sliding window's (cur, prev) as seen in window w.
func (m *limitModel) counts(w int64) (cur, prev int64) {
	switch m.win {
	case w:
		return m.cur, m.prev
	case w - 1:
		return 0, m.cur
	}
	return 0, 0
}

func (m *limitModel) estimate(t int64) float64 {
	w := m.window(t)
	cur, prev := m.counts(w)
	e := max(0, t-w*m.p)
	return float64(prev)*float64(m.p-e)/float64(m.p) + float64(cur)
}

func (m *limitModel) sliding(now, c int64, peek bool) store.Decision {
	w := m.window(now)
	cur, prev := m.counts(w)
	est := m.estimate(now)
	d := store.Decision{Allowed: est+float64(c) <= float64(m.l)}
	taken := int64(0)
	if d.Allowed {
		taken = c
	} else {
		// The smallest t > now at which the same call is allowed. The
		// estimate never grows with t (and is 0 from window w+2 on), so a
		// binary search over (now, (w+2)P] finds it.
		lo, hi := now+1, (w+2)*m.p
		for lo < hi {
			mid := lo + (hi-lo)/2
			if m.estimate(mid)+float64(c) <= float64(m.l) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		d.RetryAfter = usec(lo - now)
	}
	d.Remaining = max(0, int64(math.Floor(float64(m.l)-est-float64(taken))))
	switch {
	case cur+taken > 0:
		d.ResetAfter = usec((w+2)*m.p - now)
	case prev > 0:
		d.ResetAfter = usec((w+1)*m.p - now)
	}
	if d.Allowed && !peek {
		m.win, m.cur, m.prev = w, cur+c, prev
	}
	return d
}

func (m *limitModel) slidingLog(now, c int64, peek bool) store.Decision {
	var live []logEntry
	used := int64(0)
	for _, e := range m.log {
		if e.t > now-m.p {
			live = append(live, e)
			used += e.c
		}
	}
	d := store.Decision{Allowed: used+c <= m.l}
	if d.Allowed {
		d.Remaining = m.l - used - c
		last := now
		if len(live) > 0 {
			last = max(last, live[len(live)-1].t)
		}
		d.ResetAfter = usec(last + m.p - now)
		if !peek {
			// In time order, after the entries of the same time. Expired
			// entries go only now: a denial or a peek changes nothing.
			i := sort.Search(len(live), func(i int) bool { return live[i].t > now })
			m.log = append(live[:i], append([]logEntry{{now, c}}, live[i:]...)...)
		}
	} else {
		d.Remaining = m.l - used
		left := used
		for _, e := range live {
			left -= e.c
			if left+c <= m.l {
				d.RetryAfter = usec(e.t + m.p - now)
				break
			}
		}
		if len(live) > 0 {
			d.ResetAfter = usec(live[len(live)-1].t + m.p - now)
		}
	}
	return d
}

func (m *limitModel) gcra(now, c int64, peek bool) store.Decision {
	t := (m.p + m.l - 1) / m.l // T = ceil(P/L)
	tat := now
	if m.hasTat {
		tat = m.tat
	}
	t0 := max(tat, now)
	next := t0 + c*t
	allowAt := next - m.c*t
	d := store.Decision{Allowed: allowAt <= now}
	after := t0
	if d.Allowed {
		after = next
	} else {
		d.RetryAfter = usec(allowAt - now)
	}
	d.Remaining = min(max((m.c*t-(after-now))/t, 0), m.c)
	d.ResetAfter = usec(after - now)
	if d.Allowed && !peek {
		m.tat, m.hasTat = next, true
	}
	return d
}
