package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/hashslot"
	"github.com/coordd/coordd/internal/store"
)

// Each queue operation is one script over the queue's keys (one hash tag);
// Claim and Redrive first do the queue's upkeep, and scripts that change
// the queue last give its keys their lifetimes (lua/queue_prelude.lua).

// queueArgs are a queue script's arguments: the dead-letter ttl (ARGV[3])
// and the queue's wake-up channel (ARGV[4]) before args.
func (s *Store) queueArgs(queue string, args ...any) []any {
	return append([]any{s.deadTTL.Microseconds(), s.keys.channel(store.QueueTopic(queue))}, args...)
}

// queueEval runs a queue script with queueArgs.
func (s *Store) queueEval(ctx context.Context, sc *script, queue string, args ...any) *redis.Cmd {
	return s.eval(ctx, sc, s.keys.queue(queue), s.queueArgs(queue, args...)...)
}

// Enqueue implements store.Queues.
func (s *Store) Enqueue(ctx context.Context, queue string, m store.NewMessage) (store.Enqueued, error) {
	var e store.Enqueued
	err := s.do(ctx, "Enqueue", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		deliver := int64(-1)
		if !m.DeliverTime.IsZero() {
			deliver = m.DeliverTime.Truncate(time.Microsecond).UnixMicro()
		}
		cmd, replicated := s.evalReplicated(ctx, queueEnqueue, s.keys.queue(queue), s.queueArgs(queue, m.ID, encodeMessage(m.Payload),
			m.Delay.Microseconds(), deliver, m.MaxAttempts, m.DedupID, m.DedupWindow.Microseconds(), m.Priority, m.Group)...)
		if e, err = decodeEnqueue(cmd); err != nil {
			return err
		}
		if !replicated {
			// Added, or found added by an earlier call that may itself have
			// been unreplicated: a failover could lose it. Retry with the
			// dedup ID.
			return errNotReplicated
		}
		return nil
	})
	return e, err
}

// decodeEnqueue reads queue_enqueue.lua's reply.
func decodeEnqueue(cmd *redis.Cmd) (store.Enqueued, error) {
	r, err := replyOf(queueEnqueue, cmd)
	if err != nil {
		return store.Enqueued{}, err
	}
	dup := r.code(codeOK, codeDuplicate) == codeDuplicate
	id, deliver := r.str(1), r.int(2)
	if err := r.done(); err != nil {
		return store.Enqueued{}, err
	}
	return store.Enqueued{ID: id, DeliverTime: unixMicro(deliver), Duplicate: dup}, nil
}

// Claim implements store.Queues.
func (s *Store) Claim(ctx context.Context, queue string, req store.Claim) (store.Claimed, error) {
	var c store.Claimed
	err := s.do(ctx, "Claim", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		args := make([]any, 0, 1+len(req.Tokens))
		args = append(args, req.Visibility.Microseconds())
		for _, t := range req.Tokens {
			args = append(args, t)
		}
		c, err = decodeClaim(s.queueEval(ctx, queueClaim, queue, args...))
		return err
	})
	return c, err
}

// claimFields is the number of values queue_claim.lua gives per message.
const claimFields = 10

// decodeClaim reads queue_claim.lua's reply: the next due time, then
// claimFields values per message.
func decodeClaim(cmd *redis.Cmd) (store.Claimed, error) {
	r, err := replyOf(queueClaim, cmd)
	if err != nil {
		return store.Claimed{}, err
	}
	c := store.Claimed{NextDue: micros(r.int(0))}
	if (r.len()-1)%claimFields != 0 {
		r.fail(r.len(), "want 1 + %d values per message", claimFields)
	}
	for i := 1; i+claimFields <= r.len(); i += claimFields {
		m := store.Message{
			ID: r.str(i), Receipt: r.str(i + 2),
			Attempt: int(r.int(i + 3)), MaxAttempts: int(r.int(i + 4)),
			DeliverTime: unixMicro(r.int(i + 5)), EnqueueTime: unixMicro(r.int(i + 6)),
			ExpireTime: unixMicro(r.int(i + 7)), Priority: int(r.int(i + 8)), Group: r.str(i + 9),
		}
		enc := r.str(i + 1)
		if err := r.done(); err != nil {
			return store.Claimed{}, err
		}
		if m.Payload, err = decodeMessage(enc); err != nil {
			return store.Claimed{}, err
		}
		c.Messages = append(c.Messages, m)
	}
	if err := r.done(); err != nil {
		return store.Claimed{}, err
	}
	return c, nil
}

// Ack implements store.Queues: one script for all the receipts.
func (s *Store) Ack(ctx context.Context, queue string, receipts []string) ([]bool, error) {
	var acked []bool
	err := s.do(ctx, "Ack", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		args := make([]any, 0, len(receipts))
		for _, r := range receipts {
			args = append(args, r)
		}
		acked, err = decodeAck(s.queueEval(ctx, queueAck, queue, args...), len(receipts))
		return err
	})
	if err != nil {
		return make([]bool, len(receipts)), err
	}
	return acked, nil
}

// decodeAck reads queue_ack.lua's reply to n receipts: a code for each.
func decodeAck(cmd *redis.Cmd, n int) ([]bool, error) {
	r, err := replyOf(queueAck, cmd)
	if err != nil {
		return nil, err
	}
	if r.len() != n {
		r.fail(r.len(), "want %d values, one per receipt", n)
	}
	acked := make([]bool, n)
	for i := range acked {
		acked[i] = r.codeAt(i, codeOK, codeNo) == codeOK
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return acked, nil
}

// Nack implements store.Queues.
func (s *Store) Nack(ctx context.Context, queue, receipt string, delay time.Duration) (store.Nacked, error) {
	var n store.Nacked
	err := s.do(ctx, "Nack", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		n, err = decodeNack(s.queueEval(ctx, queueNack, queue, receipt, delay.Microseconds()))
		return err
	})
	return n, err
}

// decodeNack reads queue_nack.lua's reply.
func decodeNack(cmd *redis.Cmd) (store.Nacked, error) {
	r, err := replyOf(queueNack, cmd)
	if err != nil {
		return store.Nacked{}, err
	}
	c := r.code(codeOK, codeNo, codeDead)
	var deliver int64
	if c == codeOK {
		deliver = r.int(1)
	}
	if err := r.done(); err != nil {
		return store.Nacked{}, err
	}
	switch c {
	case codeNo:
		return store.Nacked{}, store.ErrReceiptExpired
	case codeDead:
		return store.Nacked{Dead: true}, nil
	}
	return store.Nacked{DeliverTime: unixMicro(deliver)}, nil
}

// ExtendClaim implements store.Queues.
func (s *Store) ExtendClaim(ctx context.Context, queue, receipt string, visibility time.Duration) (time.Time, error) {
	var t time.Time
	err := s.do(ctx, "ExtendClaim", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		t, err = decodeQueueExtend(s.queueEval(ctx, queueExtend, queue, receipt, visibility.Microseconds()))
		return err
	})
	return t, err
}

// decodeQueueExtend reads queue_extend.lua's reply.
func decodeQueueExtend(cmd *redis.Cmd) (time.Time, error) {
	r, err := replyOf(queueExtend, cmd)
	if err != nil {
		return time.Time{}, err
	}
	if r.code(codeOK, codeNo) != codeOK {
		if err := r.done(); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, store.ErrReceiptExpired
	}
	dl := r.int(1)
	if err := r.done(); err != nil {
		return time.Time{}, err
	}
	return unixMicro(dl), nil
}

// Stats implements store.Queues.
func (s *Store) Stats(ctx context.Context, queue string) (store.QueueStats, error) {
	var st store.QueueStats
	err := s.do(ctx, "Stats", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		st, err = decodeStats(s.queueEval(ctx, queueStats, queue))
		return err
	})
	return st, err
}

// decodeStats reads queue_stats.lua's reply.
func decodeStats(cmd *redis.Cmd) (store.QueueStats, error) {
	r, err := replyOf(queueStats, cmd)
	if err != nil {
		return store.QueueStats{}, err
	}
	st := store.QueueStats{Ready: r.int(0), Delayed: r.int(1), InFlight: r.int(2), Dead: r.int(3)}
	if err := r.done(); err != nil {
		return store.QueueStats{}, err
	}
	return st, nil
}

// Redrive implements store.Queues.
func (s *Store) Redrive(ctx context.Context, queue string, max int) (int, error) {
	var n int
	err := s.do(ctx, "Redrive", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		n, err = decodeRedrive(s.queueEval(ctx, queueRedrive, queue, max))
		return err
	})
	return n, err
}

// decodeRedrive reads queue_redrive.lua's reply: how many it moved.
func decodeRedrive(cmd *redis.Cmd) (int, error) {
	n, err := intOf(queueRedrive, cmd)
	if err == nil && n < 0 {
		return 0, fmt.Errorf("%w: %s replied %d, want a count", errCorrupt, queueRedrive.name, n)
	}
	return int(n), err
}

// RedriveIDs implements store.Queues.
func (s *Store) RedriveIDs(ctx context.Context, queue string, ids []string) (int, error) {
	var n int
	err := s.do(ctx, "RedriveIDs", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		n, err = decodeRedriveIDs(s.queueEval(ctx, queueRedriveIDs, queue, args...), len(ids))
		return err
	})
	return n, err
}

// decodeRedriveIDs reads queue_redrive_ids.lua's reply: how many of ids
// it moved.
func decodeRedriveIDs(cmd *redis.Cmd, ids int) (int, error) {
	n, err := intOf(queueRedriveIDs, cmd)
	if err == nil && (n < 0 || n > int64(ids)) {
		return 0, fmt.Errorf("%w: %s replied %d, want a count up to %d", errCorrupt, queueRedriveIDs.name, n, ids)
	}
	return int(n), err
}

// ListDead implements store.Queues.
func (s *Store) ListDead(ctx context.Context, queue string, after store.DeadPos, max, preview int) ([]store.DeadLetter, error) {
	var out []store.DeadLetter
	at, ref := int64(-1), ""
	if !after.DeadTime.IsZero() {
		at, ref = after.DeadTime.UnixMicro(), fmt.Sprintf("%016x", after.Seq)+after.ID
	}
	err := s.do(ctx, "ListDead", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		out, err = decodeListDead(s.queueEval(ctx, queueListDead, queue, at, ref, max, preview), max, preview)
		return err
	})
	return out, err
}

// listDeadFields is the number of values per dead letter in
// queue_list_dead.lua's reply.
const listDeadFields = 9

// decodeListDead reads queue_list_dead.lua's reply.
func decodeListDead(cmd *redis.Cmd, max, preview int) ([]store.DeadLetter, error) {
	r, err := replyOf(queueListDead, cmd)
	if err != nil {
		return nil, err
	}
	if r.len()%listDeadFields != 0 || r.len() > max*listDeadFields {
		r.fail(r.len(), "want %d values per dead letter, for at most %d", listDeadFields, max)
	}
	var out []store.DeadLetter
	for i := 0; i+listDeadFields <= r.len(); i += listDeadFields {
		d := store.DeadLetter{
			ID: r.str(i), Size: int(r.int(i + 2)), Attempts: int(r.int(i + 3)),
			EnqueueTime: unixMicro(r.int(i + 4)), DeadTime: unixMicro(r.int(i + 5)),
			Priority: int(r.int(i + 6)), Group: r.str(i + 7),
		}
		enc, seq := r.str(i+1), r.str(i+8)
		if err := r.done(); err != nil {
			return nil, err
		}
		var derr error
		d.Preview, derr = decodeMessage(enc)
		n, perr := strconv.ParseUint(seq, 16, 64)
		if derr != nil || perr != nil || len(seq) != 16 || len(d.Preview) > preview || d.Size < len(d.Preview) {
			return nil, fmt.Errorf("%w: %s: dead letter record", errCorrupt, queueListDead.name)
		}
		d.Seq = n
		out = append(out, d)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return out, nil
}

// PurgeDead implements store.Queues.
func (s *Store) PurgeDead(ctx context.Context, queue string, max int) (purged, remaining int64, err error) {
	err = s.do(ctx, "PurgeDead", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		purged, remaining, err = decodePurgeDead(s.queueEval(ctx, queuePurgeDead, queue, max), max)
		return err
	})
	return purged, remaining, err
}

// decodePurgeDead reads queue_purge_dead.lua's reply: {purged, remaining}.
func decodePurgeDead(cmd *redis.Cmd, max int) (int64, int64, error) {
	r, err := replyOf(queuePurgeDead, cmd)
	if err != nil {
		return 0, 0, err
	}
	purged, remaining := r.int(0), r.int(1)
	if r.len() != 2 {
		r.fail(r.len(), "want 2 values")
	}
	if err := r.done(); err != nil {
		return 0, 0, err
	}
	if purged < 0 || purged > int64(max) || remaining < 0 {
		return 0, 0, fmt.Errorf("%w: %s replied %d, %d", errCorrupt, queuePurgeDead.name, purged, remaining)
	}
	return purged, remaining, nil
}

// PartitionName implements store.Queues: store.PartitionBase, with the
// smallest suffix ".n" (none for n = 0) that puts the partition's slot in
// the middle of the p-th k-th of the slot range. A name whose tag the suffix cannot move
// (one with a '}', or a key prefix with a brace) stays the base.
func (s *Store) PartitionName(queue string, p, k int) string {
	base := store.PartitionBase(queue, p, k)
	if k == 1 || strings.Contains(queue, "}") || strings.ContainsAny(s.keys.prefix, "{}") {
		return base
	}
	// The middle three quarters of the p-th k-th: clear of the edges, which
	// an even split of the slots over k masters may round either way.
	w := hashslot.Count / k
	lo, hi := p*hashslot.Count/k+w/8, (p+1)*hashslot.Count/k-w/8
	for n := range 128 * k { // misses every one with probability < (1-0.7/k)^(128k) < e^-89
		name := base
		if n > 0 {
			name += "." + strconv.Itoa(n)
		}
		if sl := hashslot.Of(s.keys.tag("q", name)); sl >= lo && sl < hi {
			return name
		}
	}
	return base
}

// Partitionings implements store.Queues, replicated as Enqueue is: a lost
// record could leave a partition unvisited.
func (s *Store) Partitionings(ctx context.Context, queue string, k int) ([]int, error) {
	var ks []int
	key := s.keys.queueParts(queue)
	err := s.do(ctx, "Partitionings", key, func(ctx context.Context) (err error) {
		cmd, replicated := s.evalReplicated(ctx, queuePartitionings, []string{key}, k)
		if ks, err = decodePartitionings(cmd); err != nil {
			return err
		}
		if !replicated {
			return errNotReplicated
		}
		return nil
	})
	return ks, err
}

// decodePartitionings reads queue_partitionings.lua's reply: the counts,
// sorted.
func decodePartitionings(cmd *redis.Cmd) ([]int, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	vs, ok := v.([]any)
	if !ok || len(vs) == 0 {
		return nil, fmt.Errorf("%w: %s's reply %v, want the counts", errCorrupt, queuePartitionings.name, v)
	}
	ks := make([]int, 0, len(vs))
	for _, x := range vs {
		str, _ := x.(string)
		k, err := strconv.Atoi(str)
		if err != nil || k < 1 || k > store.MaxPartitions {
			return nil, fmt.Errorf("%w: %s's reply holds %v, want a count from 1 to %d", errCorrupt, queuePartitionings.name, x, store.MaxPartitions)
		}
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks, nil
}
