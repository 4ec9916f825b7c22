package storetest

import (
	"testing"
	"time"
)

// TestLimitModel checks the suite's transcription of ratelimit.go against
// the worked examples, so that a backend failing Limits/Spec is the one in
// doubt, not the model.
func TestLimitModel(t *testing.T) {
	for _, tb := range limitTables {
		t.Run(limitName(tb.limit), func(t *testing.T) {
			m := newLimitModel(tb.limit)
			now := base
			for i, st := range tb.steps {
				now = now.Add(st.adv)
				if got := m.allow(now.UnixMicro(), st.cost, st.peek); got != st.want {
					t.Errorf("step %d (t=%v, cost %d, peek %v): model %+v, table %+v", i, now.Sub(base), st.cost, st.peek, got, st.want)
				}
			}
		})
	}
}

// TestLimitModelRetry checks the model's RetryAfter by brute force: the
// call is denied at every microsecond before it and allowed at it.
func TestLimitModelRetry(t *testing.T) {
	for _, a := range algorithms {
		for i, l := range specLimits(a) {
			m := newLimitModel(l)
			rng := newRand(uint64(300 + i))
			now := base.UnixMicro()
			for j, c := range schedule(rng, l, 200) {
				now += c.adv.Microseconds()
				d := m.allow(now, c.cost, c.peek)
				if d.Allowed {
					continue
				}
				r := d.RetryAfter.Microseconds()
				if r > 3*l.Period.Microseconds() {
					t.Fatalf("%s call %d: RetryAfter %v beyond 3 periods", limitName(l), j, d.RetryAfter)
				}
				step := max(1, r/500) // probe densely near both ends
				for x := int64(1); x < r; x += step {
					if m.clone().allow(now+x, c.cost, true).Allowed {
						t.Fatalf("%s call %d: allowed %v after, before RetryAfter %v", limitName(l), j, time.Duration(x)*time.Microsecond, d.RetryAfter)
					}
				}
				if m.clone().allow(now+r-1, c.cost, true).Allowed && r > 1 {
					t.Fatalf("%s call %d: allowed 1µs before RetryAfter", limitName(l), j)
				}
				if !m.clone().allow(now+r, c.cost, true).Allowed {
					t.Fatalf("%s call %d: denied at RetryAfter %v", limitName(l), j, d.RetryAfter)
				}
			}
		}
	}
}

func (m *limitModel) clone() *limitModel {
	c := *m
	c.log = append([]logEntry(nil), m.log...)
	return &c
}
