package main

import (
	"context"
	"testing"
	"time"
)

// TestRunPacedKeepsTheRate: 16 callers of an instant operation, paced at
// 200 a second for half a second, start at most 101 operations (and most
// of them, however late the machine wakes them), where unpaced they start
// thousands.
func TestRunPacedKeepsTheRate(t *testing.T) {
	op := func(context.Context, *worker) error { return nil }
	lr := runPaced(context.Background(), 16, 200, 500*time.Millisecond, op, 1)
	if lr.ops < 50 || lr.ops > 101 {
		t.Errorf("paced at 200/s for 0.5 s: %d operations, want about 100 (at most 101)", lr.ops)
	}
	if lr := runLoop(context.Background(), 16, 100*time.Millisecond, op, 1); lr.ops < 200 {
		t.Errorf("unpaced for 0.1 s: %d operations, want far more than paced", lr.ops)
	}
}
