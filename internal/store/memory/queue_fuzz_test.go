package memory_test

import (
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
)

// FuzzQueuePayload: payloads of arbitrary bytes come back from Claim exactly
// as enqueued, on the first delivery, after a Nack, after a dead letter's
// Redrive, and after the caller reused its buffer; a second Enqueue with
// the same dedup ID is a duplicate of the first and adds nothing
// (storetest.QueuePayloads). The Redis store's target of the same name runs
// the same program through its scripts.
// Seeds: storetest.QueueSeeds (testdata/fuzz: only what the fuzzer found).
func FuzzQueuePayload(f *testing.F) {
	storetest.QueueSeeds(f)
	f.Fuzz(func(t *testing.T, queue string, p1, p2 []byte, dedup string, delayed bool) {
		clk := clock.NewFake(time.Unix(1_800_000_000, 0))
		s := memory.New(memory.Options{Clock: clk, SweepInterval: time.Hour})
		defer s.Close()
		storetest.QueuePayloads(t, s, clk, storetest.QueueInput{Queue: queue, P1: p1, P2: p2, Dedup: dedup, Delayed: delayed})
	})
}
