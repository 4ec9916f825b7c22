package linearizability

// A queue's max_in_flight, checked as a sequential model: histories of
// concurrent Claim, Ack and Nack calls on a store queue with a cap, with
// visibility timeouts far longer than a test (so that no claim expires),
// must be explained by the calls taking effect one at a time, each handing
// out exactly min(asked, cap - in flight, ready) messages.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// capIn is a queue call: a Claim of Want messages, or an Ack or a Nack
// (delay 0: ready again at once) of Receipt.
type capIn struct {
	Op      string // "claim", "ack", "nack"
	Want    int
	Receipt string
}

// capOut is its answer: the receipts claimed, or whether the claim acked
// or nacked was live.
type capOut struct {
	Receipts []string
	OK       bool
}

// capState: the receipts of the claims in flight (sorted) and how many
// messages are ready.
type capState struct {
	inFlight []string
	ready    int
}

// capModel is the sequential queue under a cap of maxInFlight.
func capModel(maxInFlight int) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return capState{ready: capMessages} },
		Step: func(st, in, out any) (bool, any) {
			s, i, o := st.(capState), in.(capIn), out.(capOut)
			switch i.Op {
			case "claim":
				if len(o.Receipts) != min(i.Want, maxInFlight-len(s.inFlight), s.ready) {
					return false, s
				}
				next := capState{inFlight: slices.Concat(s.inFlight, o.Receipts), ready: s.ready - len(o.Receipts)}
				slices.Sort(next.inFlight)
				return true, next
			default:
				k, live := slices.BinarySearch(s.inFlight, i.Receipt)
				if o.OK != live {
					return false, s
				}
				if !live {
					return true, s
				}
				next := capState{inFlight: slices.Delete(slices.Clone(s.inFlight), k, k+1), ready: s.ready}
				if i.Op == "nack" {
					next.ready++
				}
				return true, next
			}
		},
		Equal: func(a, b any) bool {
			x, y := a.(capState), b.(capState)
			return x.ready == y.ready && slices.Equal(x.inFlight, y.inFlight)
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(capIn), out.(capOut)
			if i.Op == "claim" {
				return fmt.Sprintf("claim(%d) -> %d", i.Want, len(o.Receipts))
			}
			return fmt.Sprintf("%s(%.8s) -> %v", i.Op, i.Receipt, o.OK)
		},
		DescribeState: func(st any) string {
			s := st.(capState)
			return fmt.Sprintf("%d in flight, %d ready", len(s.inFlight), s.ready)
		},
	}
}

// capMessages is how many messages the queue holds.
const capMessages = 40

// recordCap runs 6 clients for 300 calls in all on a queue of st with the
// store's cap set to storeCap, and returns the history.
func recordCap(t *testing.T, st store.Store, storeCap int) []porcupine.Operation {
	t.Helper()
	ctx := context.Background()
	q := "lin-cap-" + token.New()[:12]
	if _, err := st.ConfigureQueue(ctx, q, store.QueueSettings{MaxInFlight: storeCap}); err != nil {
		t.Fatal(err)
	}
	for i := range capMessages {
		if _, err := st.Enqueue(ctx, q, store.NewMessage{ID: token.New(), Payload: []byte(fmt.Sprint(i)), MaxAttempts: 100}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	at := func() int64 { return int64(time.Since(start)) }
	var mu sync.Mutex
	var ops []porcupine.Operation
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), *seed))
			var held []string
			for range 50 {
				var in capIn
				var out capOut
				call := at()
				switch {
				case len(held) == 0 || r.IntN(2) == 0:
					in = capIn{Op: "claim", Want: 1 + r.IntN(3)}
					req := store.Claim{Tokens: make([]string, in.Want), Visibility: time.Hour}
					for i := range req.Tokens {
						req.Tokens[i] = token.New()
					}
					cl, err := st.Claim(ctx, q, req)
					if err != nil {
						t.Error(err)
						return
					}
					for _, m := range cl.Messages {
						out.Receipts = append(out.Receipts, m.Receipt)
					}
					held = append(held, out.Receipts...)
				default:
					k := r.IntN(len(held))
					in = capIn{Op: "ack", Receipt: held[k]}
					held = slices.Delete(held, k, k+1)
					var err error
					if r.IntN(2) == 0 {
						in.Op = "nack"
						_, err = st.Nack(ctx, q, in.Receipt, 0)
						out.OK = err == nil
						if err == store.ErrReceiptExpired {
							err = nil
						}
					} else {
						var acked []bool
						acked, err = st.Ack(ctx, q, []string{in.Receipt})
						out.OK = err == nil && acked[0]
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
				ret := at()
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ops
}

// TestQueueCapLinearizable: on memory, the standalone Redis and the
// Cluster, histories under a cap of 3 are linearizable; one recorded
// under a store cap of 4 (a broken cap) checked against a cap of 3 is not.
func TestQueueCapLinearizable(t *testing.T) {
	stores := []struct {
		name string
		open func(testing.TB) store.Store
	}{
		{"memory", func(testing.TB) store.Store { return memoryStore() }},
		{"standalone", standaloneStore},
		{"cluster", clusterStore},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			st := s.open(t)
			t.Cleanup(func() { _ = st.Close() })
			ops := recordCap(t, st, 3)
			claims := 0
			for _, op := range ops {
				if in := op.Input.(capIn); in.Op == "claim" && len(op.Output.(capOut).Receipts) < in.Want {
					claims++
				}
			}
			t.Logf("%d operations, %d claims that got fewer than asked", len(ops), claims)
			check(t, "cap", capModel(3), ops, porcupine.Ok)
			broken := recordCap(t, st, 4)
			check(t, "broken cap", capModel(3), broken, porcupine.Illegal)
		})
	}
}
