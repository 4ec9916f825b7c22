package redlock

import (
	"context"
	"time"
)

// ProposeAhead runs a grant's first round for name as a coordd whose wall
// clock runs ahead by ahead would (its proposal, now+ahead+proposalLead),
// and reports how many masters took the proposal.
func ProposeAhead(s *Store, name, token string, ttl, ahead time.Duration) (proposed int) {
	p := time.Now().Add(ahead).UnixMicro() + proposalLead.Microseconds()
	as := s.all(context.Background(), acquireScript, s.keys(name), token, "A", ttl.Milliseconds(), 0,
		"1", p, max(1, int64(s.cfg.FenceTTL.Seconds())), 2*proposalLead.Microseconds())
	for _, a := range as {
		if a.err == nil && num(a.v, 0) == 1 && num(a.v, 1) == 1 {
			proposed++
		}
	}
	return proposed
}
