package memory_test

import (
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
)

// FuzzIdempotencyRecord runs a program of BeginIdempotent,
// FinishIdempotent, ExtendIdempotent and clock advances, decoded from prog,
// on two keys and two fingerprints of arbitrary bytes, with an arbitrary
// result and failure message, against the model in storetest
// (storetest.IdemProgram says what it checks). The Redis store's target of
// the same name runs the same program through its scripts.
// Seeds: storetest.IdemSeeds (testdata/fuzz: only what the fuzzer found).
func FuzzIdempotencyRecord(f *testing.F) {
	storetest.IdemSeeds(f)
	f.Fuzz(func(t *testing.T, prog []byte, key1, key2, fp1, fp2 string, result []byte, message string) {
		clk := clock.NewFake(time.Unix(1_800_000_000, 0))
		s := memory.New(memory.Options{Clock: clk, SweepInterval: time.Hour})
		defer s.Close()
		storetest.IdemProgram(t, s, clk, storetest.IdemInput{
			Prog: prog, Keys: [2]string{key1, key2}, Fingerprints: [2]string{fp1, fp2}, Result: result, Message: message,
		})
	})
}
