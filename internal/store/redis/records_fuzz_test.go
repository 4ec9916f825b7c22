package redis

// Fuzz targets of the records the Lua scripts write and read back: an
// idempotency key's hash (st fp own dl ex out) and a queue's messages
// (encodeMessage's record, the meta string, dedup entries). They run the
// programs of storetest (the same the memory store's targets of the same
// names run) through the real scripts on the shared standalone Redis
// (COORDD_TEST_REDIS), so each input costs a few round trips: expect
// hundreds of execs/s, not thousands. Without Redis they skip (fail under
// CI), as every test of this package does.
//
// Each fuzzing process has its own key prefix and each input its own keys
// (a counter prepended to the fuzzed names), deleted when the input ends.
// The store's time is a fake clock, set back to the same instant before
// every input, so that an input always does the same.
// Seeds: storetest.IdemSeeds and storetest.QueueSeeds, shared with the
// memory store's targets; testdata/fuzz/<FuzzName> holds only what the
// fuzzer found.

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
)

// fuzzT0 is every input's start time.
var fuzzT0 = time.Unix(1_800_000_000, 0)

// fuzzEnv is a fuzzing process's store.
type fuzzEnv struct {
	s     *Store
	c     *goredis.Client
	clk   *clock.Fake
	count atomic.Int64
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	addr := redistest.Standalone(f)
	prefix := "fz" + token.New()[:12]
	clk := clock.NewFake(fuzzT0)
	s, err := Open(context.Background(), Config{Mode: "standalone", Addrs: []string{addr}, Prefix: prefix, Timeout: 5 * time.Second, Clock: clk})
	if err != nil {
		f.Fatal(err)
	}
	c := s.Client().(*goredis.Client)
	f.Cleanup(func() {
		// What an input that failed before its own cleanup may have left,
		// through the store's client before its Close closes it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = c.Unlink(ctx, iter.Val()).Err()
		}
		_ = s.Close()
	})
	return &fuzzEnv{s: s, c: c, clk: clk}
}

// input starts an input: the clock back at fuzzT0, and a name prefix of
// the input's own. del's keys are deleted when the input ends.
func (e *fuzzEnv) input(t *testing.T) (name string, del func(keys ...string)) {
	e.clk.Set(fuzzT0)
	var keys []string
	t.Cleanup(func() {
		if len(keys) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := e.c.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("deleting the input's keys: %v", err)
			}
		}
	})
	return strconv.FormatInt(e.count.Add(1), 10) + ":", func(k ...string) { keys = append(keys, k...) }
}

// FuzzIdempotencyRecord runs storetest.IdemProgram through the idempotency
// scripts: results and failure messages of arbitrary bytes read back
// exactly, fingerprints of arbitrary bytes (the empty one differs from
// NUL) compared exactly, owners and deadlines as the model says, to the
// microsecond.
func FuzzIdempotencyRecord(f *testing.F) {
	storetest.IdemSeeds(f)
	e := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, prog []byte, key1, key2, fp1, fp2 string, result []byte, message string) {
		p, del := e.input(t)
		key1, key2 = p+key1, p+key2
		del(e.s.keys.idem(key1), e.s.keys.idem(key2))
		storetest.IdemProgram(t, e.s, e.clk, storetest.IdemInput{
			Prog: prog, Keys: [2]string{key1, key2}, Fingerprints: [2]string{fp1, fp2}, Result: result, Message: message,
		})
	})
}

// FuzzQueuePayload runs storetest.QueuePayloads through the queue scripts:
// payloads of arbitrary bytes come back exactly, on the first delivery,
// after a Nack and after a Redrive; dedup IDs of arbitrary bytes dedupe.
func FuzzQueuePayload(f *testing.F) {
	storetest.QueueSeeds(f)
	e := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, queue string, p1, p2 []byte, dedup string, delayed bool) {
		p, del := e.input(t)
		queue = p + queue
		del(e.s.keys.queue(queue)...)
		storetest.QueuePayloads(t, e.s, e.clk, storetest.QueueInput{Queue: queue, P1: p1, P2: p2, Dedup: dedup, Delayed: delayed})
	})
}
