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

// queueArgs are the arguments every queue script starts with (after the
// time's), as lua/queue_prelude.lua uses them.
type queueArgs struct {
	DeadTTL int64  `lua:"deadTTL,int"` // µs a dead letter is kept
	Channel string `lua:"wakeChannel"` // the queue's wake-up channel
}

func (s *Store) queueArgs(queue string) queueArgs {
	return queueArgs{DeadTTL: s.deadTTL.Microseconds(), Channel: s.keys.channel(store.QueueTopic(queue))}
}

// queueEval runs a queue script on queue.
func (s *Store) queueEval(ctx context.Context, sc *script, queue string, args scriptArgs) *redis.Cmd {
	return s.eval(ctx, sc, s.keys.queue(queue), args)
}

// queueEnqueueArgs are lua/queue_enqueue.lua's.
type queueEnqueueArgs struct {
	queueArgs
	ID          string `lua:"id"`
	Encoded     string `lua:"encoded"`         // the encoded message (codec.go)
	Delay       int64  `lua:"delay,int"`       // µs
	DeliverAt   int64  `lua:"deliverAt,int"`   // µs; -1: use the delay
	MaxAttempts int    `lua:"maxAttempts,int"` //
	DedupID     string `lua:"dedup"`           // "": none
	DedupWindow int64  `lua:"dedupWindow,int"` // µs
	Priority    int    `lua:"prio,int"`        // 0 to 9
	Group       string `lua:"group"`           // "": none
	Cap         int    `lua:"cap,int"`         // the most messages the queue may hold, dead letters included (0: no cap)
	Replace     bool   `lua:"replace,bool"`    // store.NewMessage.Replace
}

// queueClaimArgs are lua/queue_claim.lua's: the visibility timeout µs and
// one claim token per message wanted (at most queue.max_claim_messages:
// bounded work).
type queueClaimArgs struct {
	queueArgs
	Visibility int64    `lua:"visibility,int"`
	Reserved   bool     `lua:"reserved,bool"` // store.Claim.Reserved
	Tokens     []string `lua:"tokens,rest"`
}

// queueSlotsArgs are lua/queue_slots.lua's: the mode ("reserve",
// "release", "hold"), the hold µs, whether released tokens were unused,
// and the tokens (at most queue.max_claim_messages: bounded work).
type queueSlotsArgs struct {
	queueArgs
	Mode   string   `lua:"mode"`
	Hold   int64    `lua:"hold,int"`
	Unused bool     `lua:"unused,bool"`
	Tokens []string `lua:"tokens,rest"`
}

// slotsEval runs lua/queue_slots.lua on queue.
func (s *Store) slotsEval(ctx context.Context, op, queue string, a queueSlotsArgs) (*reply, error) {
	keys := append(s.keys.queue(queue), s.keys.tag("q", queue)+":slots")
	var r *reply
	err := s.do(ctx, op, keys[0], func(ctx context.Context) (err error) {
		a.queueArgs = s.queueArgs(queue)
		r, err = replyOf(queueSlots, s.eval(ctx, queueSlots, keys, a))
		return err
	})
	return r, err
}

// ReserveClaims implements store.Queues.
func (s *Store) ReserveClaims(ctx context.Context, queue string, tokens []string, hold time.Duration) (store.Reserved, error) {
	r, err := s.slotsEval(ctx, "ReserveClaims", queue, queueSlotsArgs{Mode: "reserve", Hold: hold.Microseconds(), Tokens: tokens})
	if err != nil {
		return store.Reserved{}, err
	}
	res := store.Reserved{N: int(r.int(0)), NextDue: micros(r.int(1))}
	if h := r.int(2); h > 0 && int(h) <= len(store.HeldBackReasons) {
		res.HeldBack = store.HeldBackReasons[h-1]
	} else if h != 0 {
		r.fail(2, "want a held-back code from 0 to %d", len(store.HeldBackReasons))
	}
	if res.N < 0 || res.N > len(tokens) {
		r.fail(0, "want a count from 0 to %d", len(tokens))
	}
	return res, r.done()
}

// ReleaseClaims implements store.Queues.
func (s *Store) ReleaseClaims(ctx context.Context, queue string, tokens []string, unused bool) error {
	_, err := s.slotsEval(ctx, "ReleaseClaims", queue, queueSlotsArgs{Mode: "release", Unused: unused, Tokens: tokens})
	return err
}

// HoldReservations implements store.Queues.
func (s *Store) HoldReservations(ctx context.Context, queue string, tokens []string, hold time.Duration) error {
	_, err := s.slotsEval(ctx, "HoldReservations", queue, queueSlotsArgs{Mode: "hold", Hold: hold.Microseconds(), Tokens: tokens})
	return err
}

// queueAckArgs are lua/queue_ack.lua's: the receipts (at most
// queue.max_claim_messages: bounded work).
type queueAckArgs struct {
	queueArgs
	Receipts []string `lua:"receipts,rest"`
}

// queueNackArgs are lua/queue_nack.lua's: the receipt and the delay µs.
type queueNackArgs struct {
	queueArgs
	Receipt string `lua:"receipt"`
	Delay   int64  `lua:"delay,int"`
}

// queueExtendArgs are lua/queue_extend.lua's: the receipt and the
// visibility µs.
type queueExtendArgs struct {
	queueArgs
	Receipt    string `lua:"receipt"`
	Visibility int64  `lua:"visibility,int"`
}

// queueRedriveArgs are lua/queue_redrive.lua's and
// lua/queue_purge_dead.lua's: at most this many (bounded work).
type queueRedriveArgs struct {
	queueArgs
	Max int `lua:"max,int"`
}

// queueRedriveIDsArgs are lua/queue_redrive_ids.lua's: message IDs (at
// most 10 × queue.max_claim_messages: bounded work).
type queueRedriveIDsArgs struct {
	queueArgs
	IDs []string `lua:"ids,rest"`
}

// queueListDeadArgs are lua/queue_list_dead.lua's: the position (its
// death µs, -1: from the start, and its ref: sequence number and ID), at
// most Max dead letters (store.MaxListDead) and Preview bytes of each
// payload (store.MaxDeadPreview).
type queueListDeadArgs struct {
	queueArgs
	At      int64  `lua:"at,int"`
	AtRef   string `lua:"atRef"`
	Max     int    `lua:"max,int"`
	Preview int    `lua:"preview,int"`
}

// queuePartitioningsArgs are lua/queue_partitionings.lua's: the queue's
// partition count k, added to its set of counts (kParts: in the queue's
// own slot, with no expiry: a count never leaves it, so that every
// partition that may hold a message is visited; one small set per queue
// configured with partitions).
type queuePartitioningsArgs struct {
	Partitions int `lua:"partitions"`
}

// queueConfArgs are lua/queue_conf.lua's: the mode ("get", "pause" or
// "caps") and the values it sets.
type queueConfArgs struct {
	queueArgs
	Mode   string `lua:"mode"`
	Paused bool   `lua:"paused,bool"`
	Max    int    `lua:"max,int"`
	Limit  int64  `lua:"rl,int"`
	Period int64  `lua:"rp,int"` // µs
}

// QueueSettings implements store.Queues.
func (s *Store) QueueSettings(ctx context.Context, queue string) (store.QueueSettings, error) {
	return s.queueConf(ctx, "QueueSettings", queue, queueConfArgs{Mode: "get"})
}

// PauseQueue implements store.Queues.
func (s *Store) PauseQueue(ctx context.Context, queue string, paused bool) (store.QueueSettings, error) {
	return s.queueConf(ctx, "PauseQueue", queue, queueConfArgs{Mode: "pause", Paused: paused})
}

// ConfigureQueue implements store.Queues.
func (s *Store) ConfigureQueue(ctx context.Context, queue string, c store.QueueSettings) (store.QueueSettings, error) {
	return s.queueConf(ctx, "ConfigureQueue", queue, queueConfArgs{Mode: "caps", Max: c.MaxInFlight, Limit: c.RateLimit, Period: c.RatePeriod.Microseconds()})
}

func (s *Store) queueConf(ctx context.Context, op, queue string, a queueConfArgs) (store.QueueSettings, error) {
	var c store.QueueSettings
	err := s.do(ctx, op, s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		a.queueArgs = s.queueArgs(queue)
		c, err = decodeQueueConf(s.queueEval(ctx, queueConf, queue, a))
		return err
	})
	return c, err
}

// decodeQueueConf reads queue_conf.lua's reply.
func decodeQueueConf(cmd *redis.Cmd) (store.QueueSettings, error) {
	r, err := replyOf(queueConf, cmd)
	if err != nil {
		return store.QueueSettings{}, err
	}
	r.need(4)
	p, max, rl, rp := r.int(0), r.int(1), r.int(2), r.int(3)
	if err := r.done(); err != nil {
		return store.QueueSettings{}, err
	}
	return store.QueueSettings{Paused: p == 1, MaxInFlight: int(max), RateLimit: rl, RatePeriod: time.Duration(rp) * time.Microsecond}, nil
}

// Enqueue implements store.Queues.
func (s *Store) Enqueue(ctx context.Context, queue string, m store.NewMessage) (store.Enqueued, error) {
	var e store.Enqueued
	err := s.do(ctx, "Enqueue", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		if s.memoryHigh(ctx, s.keys.queue(queue)[0]) {
			return store.ErrMemoryHigh
		}
		deliver := int64(-1)
		if !m.DeliverTime.IsZero() {
			deliver = m.DeliverTime.Truncate(time.Microsecond).UnixMicro()
		}
		ks := s.keys.queue(queue)
		cmd, replicated := s.evalReplicated(ctx, queueEnqueue, ks[:queueEnqueueKeys], queueEnqueueArgs{
			queueArgs: s.queueArgs(queue), ID: m.ID, Encoded: encodeMessage(m.Payload), Delay: m.Delay.Microseconds(),
			DeliverAt: deliver, MaxAttempts: m.MaxAttempts, DedupID: m.DedupID, DedupWindow: m.DedupWindow.Microseconds(),
			Priority: m.Priority, Group: m.Group, Cap: m.MaxMessages, Replace: m.Replace,
		})
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
	c := r.code(codeOK, codeDuplicate, codeReplaced, codeQueueFull)
	if c == codeQueueFull {
		if err := r.done(); err != nil {
			return store.Enqueued{}, err
		}
		return store.Enqueued{}, store.ErrQueueFull
	}
	dup := c == codeDuplicate
	id, deliver := r.str(1), r.int(2)
	if err := r.done(); err != nil {
		return store.Enqueued{}, err
	}
	return store.Enqueued{ID: id, DeliverTime: unixMicro(deliver), Duplicate: dup, Replaced: c == codeReplaced}, nil
}

// Claim implements store.Queues.
func (s *Store) Claim(ctx context.Context, queue string, req store.Claim) (store.Claimed, error) {
	var c store.Claimed
	err := s.do(ctx, "Claim", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		c, err = decodeClaim(s.queueEval(ctx, queueClaim, queue, queueClaimArgs{s.queueArgs(queue), req.Visibility.Microseconds(), req.Reserved, req.Tokens}))
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
	if h := r.int(1); h > 0 && int(h) <= len(store.HeldBackReasons) {
		c.HeldBack = store.HeldBackReasons[h-1]
	} else if h != 0 {
		r.fail(1, "want a held-back code from 0 to %d", len(store.HeldBackReasons))
	}
	if (r.len()-2)%claimFields != 0 {
		r.fail(r.len(), "want 2 + %d values per message", claimFields)
	}
	for i := 2; i+claimFields <= r.len(); i += claimFields {
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
		acked, err = decodeAck(s.queueEval(ctx, queueAck, queue, queueAckArgs{s.queueArgs(queue), receipts}), len(receipts))
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
		n, err = decodeNack(s.queueEval(ctx, queueNack, queue, queueNackArgs{s.queueArgs(queue), receipt, delay.Microseconds()}))
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
		t, err = decodeQueueExtend(s.queueEval(ctx, queueExtend, queue, queueExtendArgs{s.queueArgs(queue), receipt, visibility.Microseconds()}))
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
		st, err = decodeStats(s.queueEval(ctx, queueStats, queue, s.queueArgs(queue)))
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
	st := store.QueueStats{Ready: r.int(0), Delayed: r.int(1), InFlight: r.int(2), Dead: r.int(3), Paused: r.int(4) == 1}
	if err := r.done(); err != nil {
		return store.QueueStats{}, err
	}
	return st, nil
}

// Redrive implements store.Queues.
func (s *Store) Redrive(ctx context.Context, queue string, max int) (int, error) {
	var n int
	err := s.do(ctx, "Redrive", s.keys.queue(queue)[0], func(ctx context.Context) (err error) {
		n, err = decodeRedrive(s.queueEval(ctx, queueRedrive, queue, queueRedriveArgs{s.queueArgs(queue), max}))
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
		n, err = decodeRedriveIDs(s.queueEval(ctx, queueRedriveIDs, queue, queueRedriveIDsArgs{s.queueArgs(queue), ids}), len(ids))
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
		out, err = decodeListDead(s.queueEval(ctx, queueListDead, queue, queueListDeadArgs{s.queueArgs(queue), at, ref, max, preview}), max, preview)
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
		purged, remaining, err = decodePurgeDead(s.queueEval(ctx, queuePurgeDead, queue, queueRedriveArgs{s.queueArgs(queue), max}), max)
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
		cmd, replicated := s.evalReplicated(ctx, queuePartitionings, []string{key}, queuePartitioningsArgs{k})
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
