package soak

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tally counts one worker's calls and their outcomes; the workers' tallies
// are merged at the end.
type tally struct {
	ops      map[string]int64 // by op, e.g. "Lock(wait)"
	outcomes map[string]int64 // non-OK outcomes by code/reason
	byOp     map[string]int64 // non-OK outcomes by op and code/reason
	events   map[string]int64 // things that are neither calls nor errors
	bad      []string         // unexpected outcomes, the first few
	nbad     int64
}

func newTally() *tally {
	return &tally{ops: map[string]int64{}, outcomes: map[string]int64{}, byOp: map[string]int64{}, events: map[string]int64{}}
}

func (t *tally) merge(o *tally) {
	for k, v := range o.ops {
		t.ops[k] += v
	}
	for k, v := range o.outcomes {
		t.outcomes[k] += v
	}
	for k, v := range o.byOp {
		t.byOp[k] += v
	}
	for k, v := range o.events {
		t.events[k] += v
	}
	t.nbad += o.nbad
	for _, b := range o.bad {
		if len(t.bad) < 20 {
			t.bad = append(t.bad, b)
		}
	}
}

// outcome is err's code and, if it has a coordd ErrorInfo, its reason.
func outcome(err error) (codes.Code, string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

// record counts a call of op that returned err. disrupted says the test
// itself cancelled the call, timed it out or closed its connection (or the
// load was ending); expected lists the FAILED_PRECONDITION reasons op may
// get. It reports whether the call succeeded.
//
// Allowed: OK; CANCELLED and DEADLINE_EXCEEDED when disrupted; UNAVAILABLE
// when disrupted, or with reason STORE_UNAVAILABLE on Redis;
// FAILED_PRECONDITION with an expected reason. Everything else —
// INTERNAL and UNKNOWN above all, but also INVALID_ARGUMENT (the load sends
// only valid requests), RESOURCE_EXHAUSTED (it stays far under every limit)
// and a DEADLINE_EXCEEDED of the test's safety timeout (a hung call) — is
// unexpected.
func (t *tally) record(op string, err error, disrupted, redis bool, expected ...string) bool {
	t.ops[op]++
	if err == nil {
		return true
	}
	code, reason := outcome(err)
	key := code.String()
	if reason != "" && reason != code.String() {
		key += "/" + reason
	}
	t.outcomes[key]++
	t.byOp[op+" "+key]++
	ok := false
	switch code {
	case codes.Canceled, codes.DeadlineExceeded:
		ok = disrupted
	case codes.Unavailable:
		ok = disrupted || redis && reason == "STORE_UNAVAILABLE"
	case codes.FailedPrecondition:
		ok = slices.Contains(expected, reason)
	}
	if !ok {
		t.unexpected(fmt.Sprintf("%s: %v (disrupted=%v)", op, err, disrupted))
	}
	return false
}

func (t *tally) unexpected(what string) {
	t.nbad++
	if len(t.bad) < 20 {
		t.bad = append(t.bad, what)
	}
}

func (t *tally) event(name string) { t.events[name]++ }

// total is the number of calls.
func (t *tally) total() int64 {
	var n int64
	for _, v := range t.ops {
		n += v
	}
	return n
}

// table formats m as sorted "key n" lines, indented, several to a line.
func table(m map[string]int64) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	line := 0
	for _, k := range keys {
		cell := fmt.Sprintf("%s=%d", k, m[k])
		if line > 0 && line+len(cell) > 110 {
			b.WriteString("\n")
			line = 0
		}
		if line == 0 {
			b.WriteString("    ")
			line = 4
		} else {
			b.WriteString("  ")
			line += 2
		}
		b.WriteString(cell)
		line += len(cell)
	}
	if len(keys) == 0 {
		b.WriteString("    none")
	}
	return b.String()
}
