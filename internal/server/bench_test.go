package server_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// The benchmarks run each RPC through the generated client over loopback
// against the memory store, beside an empty unary call on the same server
// (the floor: gRPC itself), at 64 concurrent callers. Each reports
// "x-empty": its time per op in units of the empty call's, measured in the
// same run. Run them with
//
//	go test -run '^$' -bench BenchmarkRPC -benchmem ./internal/server

// emptyService is a hand-written unary service that does nothing.
var emptyService = grpc.ServiceDesc{
	ServiceName: "bench.Empty",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
}

func registerEmpty(c *config) {
	c.register = func(s *grpc.Server) { s.RegisterService(&emptyService, struct{}{}) }
}

// emptyNsPerOp is the empty call's time per op in the last run, for the
// ratios of the benchmarks that follow it.
var emptyNsPerOp float64

func BenchmarkRPC(b *testing.B) {
	var reg *prometheus.Registry
	h := newHarness(b, registerEmpty, withMetrics(&reg), withEnvoy(b, "domain: bench\ndescriptors:\n  - key: key\n    rate_limit: {unit: second, requests_per_unit: 1000000}\n"))
	bg := context.Background()
	var seq atomic.Int64
	name := func(prefix string) string { return prefix + strconv.FormatInt(seq.Add(1)%10000, 10) }
	run := func(b *testing.B, ratioTo float64, op func() error) {
		b.SetParallelism(32) // 64 callers on 2 cores
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if ratioTo == 0 {
			emptyNsPerOp = ns
		} else if emptyNsPerOp > 0 {
			b.ReportMetric(ns/emptyNsPerOp, "x-empty")
		}
	}
	b.Run("empty", func(b *testing.B) {
		run(b, 0, func() error {
			return h.conn.Invoke(bg, "/bench.Empty/Call", &emptypb.Empty{}, new(emptypb.Empty))
		})
	})
	b.Run("allow", func(b *testing.B) {
		l := inline(coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, 1_000_000, time.Second, 0)
		run(b, 1, func() error {
			_, err := h.limits.Allow(bg, &coordv1.AllowRequest{Key: name("k"), Limit: l})
			return err
		})
	})
	b.Run("allow_fixed_window", func(b *testing.B) {
		l := inline(coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, 1_000_000, time.Second, 0)
		run(b, 1, func() error {
			_, err := h.limits.Allow(bg, &coordv1.AllowRequest{Key: name("k"), Limit: l})
			return err
		})
	})
	b.Run("should_rate_limit", func(b *testing.B) {
		rls := h.rls()
		run(b, 1, func() error {
			_, err := rls.ShouldRateLimit(bg, rlsReq("bench", "key", name("k")))
			return err
		})
	})
	b.Run("lock_release", func(b *testing.B) {
		run(b, 1, func() error {
			n := name("l") + "-" + strconv.FormatInt(seq.Add(1), 10)
			g, err := h.locks.Lock(bg, &coordv1.LockRequest{Name: n, Ttl: dur(time.Minute)})
			if err != nil {
				return err
			}
			_, err = h.locks.Release(bg, &coordv1.ReleaseRequest{Name: n, Token: g.GetToken()})
			return err
		})
	})
	b.Run("begin_finish", func(b *testing.B) {
		run(b, 1, func() error {
			k := "i" + strconv.FormatInt(seq.Add(1), 10)
			r, err := h.idem.BeginIdempotent(bg, &coordv1.BeginIdempotentRequest{Key: k, Fingerprint: "f"})
			if err != nil {
				return err
			}
			_, err = h.idem.Finish(bg, &coordv1.FinishRequest{Key: k, OwnerToken: r.GetOwnerToken(), Result: []byte("ok"), ResultTtl: dur(time.Second)})
			return err
		})
	})
	b.Run("enqueue_claim_ack", func(b *testing.B) {
		run(b, 1, func() error {
			q := name("q")
			if _, err := h.queues.Enqueue(bg, &coordv1.EnqueueRequest{Queue: q, Payload: []byte("x")}); err != nil {
				return err
			}
			c, err := h.queues.Claim(bg, &coordv1.ClaimRequest{Queue: q})
			if err != nil {
				return err
			}
			for _, m := range c.GetMessages() {
				if _, err := h.queues.Ack(bg, &coordv1.AckRequest{Queue: q, Receipt: m.GetReceipt()}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}
