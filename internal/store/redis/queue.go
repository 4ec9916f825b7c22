package redis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// Each queue operation is one script over the queue's keys (one hash tag),
// which first does the queue's upkeep and last gives its keys their
// lifetimes (lua/queue_prelude.lua).

// queueEval runs a queue script with the dead-letter ttl (ARGV[3]) before
// args.
func (s *Store) queueEval(ctx context.Context, sc *script, queue string, args ...any) *redis.Cmd {
	return s.eval(ctx, sc, s.keys.queue(queue), append([]any{s.deadTTL.Microseconds()}, args...)...)
}

// Enqueue implements store.Queues.
func (s *Store) Enqueue(ctx context.Context, queue string, m store.NewMessage) (store.Enqueued, error) {
	var e store.Enqueued
	err := s.do(ctx, "Enqueue", s.keys.queue(queue)[0], func(ctx context.Context) error {
		deliver := int64(-1)
		if !m.DeliverTime.IsZero() {
			deliver = m.DeliverTime.Truncate(time.Microsecond).UnixMicro()
		}
		cmd, replicated := s.evalReplicated(ctx, queueEnqueue, s.keys.queue(queue), s.deadTTL.Microseconds(), m.ID, encodeMessage(m.Payload),
			m.Delay.Microseconds(), deliver, m.MaxAttempts, m.DedupID, m.DedupWindow.Microseconds(),
			s.keys.channel(store.QueueTopic(queue)))
		r, err := cmd.Slice()
		if err != nil {
			return err
		}
		if !replicated {
			// Added, or found added by an earlier call that may itself have
			// been unreplicated: a failover could lose it. Retry with the
			// dedup ID.
			return errNotReplicated
		}
		e = store.Enqueued{ID: toStr(r[1]), DeliverTime: unixMicro(toInt(r[2])), Duplicate: toInt(r[0]) == 1}
		return nil
	})
	return e, err
}

// Claim implements store.Queues.
func (s *Store) Claim(ctx context.Context, queue string, req store.Claim) (store.Claimed, error) {
	var c store.Claimed
	err := s.do(ctx, "Claim", s.keys.queue(queue)[0], func(ctx context.Context) error {
		args := make([]any, 0, 2+len(req.Tokens))
		args = append(args, s.deadTTL.Microseconds())
		args = append(args, req.Visibility.Microseconds())
		for _, t := range req.Tokens {
			args = append(args, t)
		}
		r, err := s.eval(ctx, queueClaim, s.keys.queue(queue), args...).Slice()
		if err != nil {
			return err
		}
		c.NextDue = micros(toInt(r[0]))
		const fields = 8
		for i := 1; i+fields <= len(r); i += fields {
			payload, err := decodeMessage(toStr(r[i+1]))
			if err != nil {
				return err
			}
			c.Messages = append(c.Messages, store.Message{
				ID: toStr(r[i]), Payload: payload, Receipt: toStr(r[i+2]),
				Attempt: int(toInt(r[i+3])), MaxAttempts: int(toInt(r[i+4])),
				DeliverTime: unixMicro(toInt(r[i+5])), EnqueueTime: unixMicro(toInt(r[i+6])),
				ExpireTime: unixMicro(toInt(r[i+7])),
			})
		}
		return nil
	})
	return c, err
}

// Ack implements store.Queues: one script for all the receipts.
func (s *Store) Ack(ctx context.Context, queue string, receipts []string) ([]bool, error) {
	acked := make([]bool, len(receipts))
	err := s.do(ctx, "Ack", s.keys.queue(queue)[0], func(ctx context.Context) error {
		args := make([]any, 1, 1+len(receipts))
		args[0] = s.deadTTL.Microseconds()
		for _, r := range receipts {
			args = append(args, r)
		}
		r, err := s.eval(ctx, queueAck, s.keys.queue(queue), args...).Int64Slice()
		if err != nil {
			return err
		}
		for i := range acked {
			acked[i] = i < len(r) && r[i] == 1
		}
		return nil
	})
	return acked, err
}

// Nack implements store.Queues.
func (s *Store) Nack(ctx context.Context, queue, receipt string, delay time.Duration) (store.Nacked, error) {
	var n store.Nacked
	err := s.do(ctx, "Nack", s.keys.queue(queue)[0], func(ctx context.Context) error {
		r, err := s.queueEval(ctx, queueNack, queue, receipt, delay.Microseconds(),
			s.keys.channel(store.QueueTopic(queue))).Slice()
		if err != nil {
			return err
		}
		switch toInt(r[0]) {
		case 0:
			return store.ErrReceiptExpired
		case 2:
			n = store.Nacked{Dead: true}
		default:
			n = store.Nacked{DeliverTime: unixMicro(toInt(r[1]))}
		}
		return nil
	})
	return n, err
}

// ExtendClaim implements store.Queues.
func (s *Store) ExtendClaim(ctx context.Context, queue, receipt string, visibility time.Duration) (time.Time, error) {
	var t time.Time
	err := s.do(ctx, "ExtendClaim", s.keys.queue(queue)[0], func(ctx context.Context) error {
		dl, err := s.queueEval(ctx, queueExtend, queue, receipt, visibility.Microseconds()).Int64()
		if err != nil {
			return err
		}
		if dl == 0 {
			return store.ErrReceiptExpired
		}
		t = unixMicro(dl)
		return nil
	})
	return t, err
}

// Stats implements store.Queues.
func (s *Store) Stats(ctx context.Context, queue string) (store.QueueStats, error) {
	var st store.QueueStats
	err := s.do(ctx, "Stats", s.keys.queue(queue)[0], func(ctx context.Context) error {
		r, err := s.queueEval(ctx, queueStats, queue).Slice()
		if err != nil {
			return err
		}
		st = store.QueueStats{Ready: toInt(r[0]), Delayed: toInt(r[1]), InFlight: toInt(r[2]), Dead: toInt(r[3])}
		return nil
	})
	return st, err
}

// Redrive implements store.Queues.
func (s *Store) Redrive(ctx context.Context, queue string, max int) (int, error) {
	var n int64
	err := s.do(ctx, "Redrive", s.keys.queue(queue)[0], func(ctx context.Context) error {
		var err error
		n, err = s.queueEval(ctx, queueRedrive, queue, max, s.keys.channel(store.QueueTopic(queue))).Int64()
		return err
	})
	return int(n), err
}
