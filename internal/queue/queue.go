// Package queue implements QueueService's rules on top of store.Queues:
// defaults and bounds, message IDs and claim tokens, long-polling claims
// without polling, and the Nack backoff.
package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

// Config holds the queue rules.
type Config struct {
	DefaultVisibility  time.Duration `mapstructure:"default_visibility_timeout"`
	MaxVisibility      time.Duration `mapstructure:"max_visibility_timeout"`
	MaxClaimMessages   int           `mapstructure:"max_claim_messages"`
	DefaultMaxAttempts int           `mapstructure:"default_max_attempts"`
	MaxAttemptsLimit   int           `mapstructure:"max_attempts_limit"`
	MaxPayloadBytes    int           `mapstructure:"max_payload_bytes"`
	MaxDelay           time.Duration `mapstructure:"max_delay"`
	DedupWindow        time.Duration `mapstructure:"dedup_window"`
	// MaxMessages caps the messages one queue holds, dead letters
	// included (a partitioned queue: each of its K partitions holds at
	// most MaxMessages/K, rounded up).
	MaxMessages int           `mapstructure:"max_messages"`
	BackoffBase time.Duration `mapstructure:"nack_backoff_base"` // the first Nack's delay (with jitter)
	BackoffMax  time.Duration `mapstructure:"nack_backoff_max"`
	// MaxSchedulesPerNamespace bounds the schedules of one namespace.
	MaxSchedulesPerNamespace int `mapstructure:"max_schedules_per_namespace"`
	// MaxInFlightLimit bounds a queue's max_in_flight (ConfigureQueue).
	MaxInFlightLimit int           `mapstructure:"max_in_flight_limit"`
	MaxWait          time.Duration `mapstructure:"-"`
	MaxNameBytes     int           `mapstructure:"-"` // the longest queue name and dedup_id

	// DeadLetterTTL is how long a dead letter is kept after it died. The
	// store keeps it (memory.Options, redis.Options); it is here to be
	// configured with the other queue rules.
	DeadLetterTTL time.Duration `mapstructure:"dead_letter_ttl"`

	// Partitioned lists the queues spread over several partitions.
	Partitioned []Partitioned `mapstructure:"partitioned"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		DefaultVisibility:        30 * time.Second,
		MaxVisibility:            12 * time.Hour,
		MaxClaimMessages:         100,
		DefaultMaxAttempts:       5,
		MaxAttemptsLimit:         100,
		MaxPayloadBytes:          256 << 10,
		MaxDelay:                 168 * time.Hour,
		DedupWindow:              5 * time.Minute,
		MaxMessages:              1_000_000,
		DeadLetterTTL:            store.DefaultDeadLetterTTL,
		BackoffBase:              time.Second,
		BackoffMax:               5 * time.Minute,
		MaxInFlightLimit:         1_000_000,
		MaxSchedulesPerNamespace: 1000,
		MaxWait:                  time.Minute,
		MaxNameBytes:             256,
	}
}

// Store is what the queues need of the store.
type Store interface {
	store.Queues
	store.Schedules
}

// Service runs queues.
type Service struct {
	st    Store
	sub   store.Subscriber
	clock clock.Clock // checks deliver_time against queue.max_delay
	cfg   Config
	drain waiter.Drain
	parts map[string]*partitioned // by scoped name: the configured queues
}

// New returns a Service. clk should tell the store's time (near enough: it
// only bounds how far ahead deliver_time may be). Waits end early when drain
// is closed.
func New(st Store, sub store.Subscriber, clk clock.Clock, cfg Config, drain waiter.Drain) *Service {
	s := &Service{st: st, sub: sub, clock: clk, cfg: cfg, drain: drain, parts: map[string]*partitioned{}}
	for _, p := range cfg.Partitioned {
		s.parts[store.Scope(p.Namespace, p.Name)] = &partitioned{k: p.Partitions}
	}
	return s
}

// EnqueueRequest adds a message. Zero values are unset.
type EnqueueRequest struct {
	NS, Queue   string
	Payload     []byte
	Delay       time.Duration
	DeliverTime time.Time
	DedupID     string
	MaxAttempts int
	Priority    int    // 0 to MaxPriority
	Group       string // "": none
	Replace     bool   // DEDUP_MODE_REPLACE (store.NewMessage.Replace)
}

// MaxPriority is the highest message priority.
const MaxPriority = 9

// Enqueue adds a message.
func (s *Service) Enqueue(ctx context.Context, r EnqueueRequest) (store.Enqueued, error) {
	if err := s.checkQueue(r.Queue); err != nil {
		return store.Enqueued{}, err
	}
	if err := validate.Bytes("payload", r.Payload, s.cfg.MaxPayloadBytes); err != nil {
		return store.Enqueued{}, err
	}
	if r.Delay != 0 && !r.DeliverTime.IsZero() {
		return store.Enqueued{}, validate.Errorf("delay", "and deliver_time are both set; set one")
	}
	if err := validate.Wait("delay", r.Delay, s.cfg.MaxDelay); err != nil {
		return store.Enqueued{}, err
	}
	if !r.DeliverTime.IsZero() && r.DeliverTime.Sub(s.clock.Now()) > s.cfg.MaxDelay {
		return store.Enqueued{}, validate.Errorf("deliver_time", "is more than %v ahead", s.cfg.MaxDelay)
	}
	if err := validate.Label("dedup_id", r.DedupID, s.cfg.MaxNameBytes); err != nil {
		return store.Enqueued{}, err
	}
	if r.Replace && r.DedupID == "" {
		return store.Enqueued{}, validate.Errorf("dedup_mode", "is DEDUP_MODE_REPLACE without a dedup_id; set dedup_id")
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = s.cfg.DefaultMaxAttempts
	}
	if r.MaxAttempts < 1 || r.MaxAttempts > s.cfg.MaxAttemptsLimit {
		return store.Enqueued{}, validate.Errorf("max_attempts", "is %d; it must be between 1 and %d", r.MaxAttempts, s.cfg.MaxAttemptsLimit)
	}
	if r.Priority < 0 || r.Priority > MaxPriority {
		return store.Enqueued{}, validate.Errorf("priority", "is %d; it must be between 0 and %d", r.Priority, MaxPriority)
	}
	if r.Group != "" {
		if err := validate.Name("group", r.Group, s.cfg.MaxNameBytes); err != nil {
			return store.Enqueued{}, err
		}
	}
	parts, pq, err := s.partitionsOf(ctx, store.Scope(r.NS, r.Queue))
	if err != nil {
		return store.Enqueued{}, err
	}
	to, max := parts[0], s.cfg.MaxMessages
	if pq != nil {
		to = pq.enqueuePart(parts, r.Group, r.DedupID)
		max = (max + pq.k - 1) / pq.k
	}
	return s.st.Enqueue(ctx, to.name, store.NewMessage{
		ID: token.New(), Payload: r.Payload, Delay: r.Delay, DeliverTime: r.DeliverTime,
		MaxAttempts: r.MaxAttempts, DedupID: r.DedupID, DedupWindow: s.cfg.DedupWindow,
		Priority: r.Priority, Group: r.Group, MaxMessages: max, Replace: r.Replace,
	})
}

// ClaimRequest asks for messages. Zero values are unset.
type ClaimRequest struct {
	NS, Queue        string
	Max              int
	Visibility, Wait time.Duration
	// HeldBack, if set, is told each time a setting of the queue kept
	// ready messages from a step of the claim (store.Claimed.HeldBack).
	HeldBack func(reason string)
}

// Claim hands out up to r.Max ready messages, waiting up to r.Wait for one.
func (s *Service) Claim(ctx context.Context, r ClaimRequest) ([]store.Message, error) {
	if err := s.checkQueue(r.Queue); err != nil {
		return nil, err
	}
	if r.Max == 0 {
		r.Max = 1
	}
	if r.Max < 1 || r.Max > s.cfg.MaxClaimMessages {
		return nil, validate.Errorf("max_messages", "is %d; it must be between 1 and %d", r.Max, s.cfg.MaxClaimMessages)
	}
	if r.Visibility == 0 {
		r.Visibility = s.cfg.DefaultVisibility
	}
	if err := validate.Duration("visibility_timeout", r.Visibility, s.cfg.MaxVisibility); err != nil {
		return nil, err
	}
	if err := validate.Wait("wait", r.Wait, s.cfg.MaxWait); err != nil {
		return nil, err
	}
	parts, pq, err := s.partitionsOf(ctx, store.Scope(r.NS, r.Queue))
	if err != nil {
		return nil, err
	}
	tokens := make([]string, r.Max)
	for i := range tokens {
		tokens[i] = token.New()
	}
	topics := make([]string, len(parts))
	for i, pt := range parts {
		topics[i] = store.QueueTopic(pt.name)
	}
	q := store.Scope(r.NS, r.Queue)
	var msgs []store.Message
	err = waiter.WaitAny(ctx, s.sub, topics, r.Wait, s.drain, func(ctx context.Context) (bool, time.Duration, error) {
		capped, err := s.isCapped(ctx, q, pq)
		if err != nil {
			return false, 0, err
		}
		var next time.Duration
		if capped {
			msgs, next, err = s.claimReserved(ctx, q, pq.rotate(parts), tokens, r)
		} else {
			msgs, next, _, err = s.claimFrom(ctx, pq.rotate(parts), tokens, r.Visibility, r.HeldBack, false)
		}
		return len(msgs) > 0, next, err
	})
	return msgs, err
}

// claimReserved claims from the partitions of a partitioned queue q with
// caps: reservations first (what the caps let through, counted across
// every partition and instance), claims with them, and the reservations
// the claims did not use given back.
func (s *Service) claimReserved(ctx context.Context, q string, parts []part, tokens []string, r ClaimRequest) ([]store.Message, time.Duration, error) {
	res, err := s.st.ReserveClaims(ctx, q, tokens, r.Visibility+reserveMargin)
	if err != nil {
		return nil, 0, err
	}
	if res.HeldBack != "" && r.HeldBack != nil {
		r.HeldBack(res.HeldBack)
	}
	if res.N == 0 {
		return nil, res.NextDue, nil
	}
	msgs, next, uncertain, err := s.claimFrom(ctx, parts, tokens[:res.N], r.Visibility, r.HeldBack, true)
	if len(msgs) > 0 {
		// The claims' deadlines count from when each partition's claim
		// ran, which may be later than the reservation: each now lasts
		// as long as its claim. A failure leaves a claim that ran late
		// uncounted once its reservation ends.
		used := make([]string, len(msgs))
		for i, m := range msgs {
			used[i] = receiptToken(m.Receipt[:store.ReceiptLen])
		}
		_ = s.st.HoldReservations(ctx, q, used, r.Visibility+reserveMargin)
	}
	if unused := tokens[len(msgs):res.N]; len(unused) > 0 && !uncertain {
		// A failed release leaves the reservations to end by themselves;
		// after a partition's claim failed, its outcome is unknown (its
		// messages may be claimed): they are left to end too.
		_ = s.st.ReleaseClaims(ctx, q, unused, true)
	}
	if res.NextDue > 0 && (next == 0 || res.NextDue < next) {
		next = res.NextDue
	}
	return msgs, next, err
}

// claimFrom claims up to len(tokens) messages from parts, in order, until
// it has them all. It returns the soonest NextDue of the partitions it
// asked, and whether a partition's claim failed (its outcome unknown). A
// failure after some messages were claimed is dropped with the
// partitions not asked: the messages are returned (a failed claim's
// messages come back when its visibility timeout passes).
func (s *Service) claimFrom(ctx context.Context, parts []part, tokens []string, vis time.Duration, held func(string), reserved bool) ([]store.Message, time.Duration, bool, error) {
	var msgs []store.Message
	var next time.Duration
	for _, pt := range parts {
		c, err := s.st.Claim(ctx, pt.name, store.Claim{Tokens: tokens[len(msgs):], Visibility: vis, Reserved: reserved})
		if err != nil {
			if len(msgs) > 0 {
				return msgs, 0, true, nil
			}
			return nil, 0, true, err
		}
		if c.HeldBack != "" && held != nil {
			held(c.HeldBack)
		}
		for _, m := range c.Messages {
			m.Receipt += pt.receiptSuffix()
			msgs = append(msgs, m)
		}
		if c.NextDue > 0 && (next == 0 || c.NextDue < next) {
			next = c.NextDue
		}
		if len(msgs) == len(tokens) {
			break
		}
	}
	return msgs, next, false, nil
}

// Ack deletes the messages of live claims, in one step per partition,
// and reports for each receipt whether its claim was live. list says the
// receipts came as the request's list (field receipts) rather than its
// single receipt.
func (s *Service) Ack(ctx context.Context, ns, queue string, receipts []string, list bool) ([]bool, error) {
	if err := s.checkQueue(queue); err != nil {
		return nil, err
	}
	q := store.Scope(ns, queue)
	if !list {
		r, pt, err := s.receiptPart(q, "receipt", receipts[0])
		if err != nil {
			return nil, err
		}
		acked, err := s.st.Ack(ctx, pt.name, []string{r})
		if err == nil {
			s.release(ctx, q, []string{r}, acked)
		}
		return acked, err
	}
	if len(receipts) > s.cfg.MaxClaimMessages {
		return nil, validate.Errorf("receipts", "has %d receipts; the limit is %d", len(receipts), s.cfg.MaxClaimMessages)
	}
	seen := make(map[string]int, len(receipts))
	byPart := map[string][]int{} // partition name -> indexes into receipts
	var order []string
	inner := make([]string, len(receipts))
	for i, r := range receipts {
		field := fmt.Sprintf("receipts[%d]", i)
		in, pt, err := s.receiptPart(q, field, r)
		if err != nil {
			return nil, err
		}
		if j, ok := seen[r]; ok {
			return nil, validate.Errorf(field, "repeats receipts[%d]", j)
		}
		seen[r] = i
		inner[i] = in
		if _, ok := byPart[pt.name]; !ok {
			order = append(order, pt.name)
		}
		byPart[pt.name] = append(byPart[pt.name], i)
	}
	if len(order) == 1 {
		acked, err := s.st.Ack(ctx, order[0], inner)
		if err == nil {
			s.release(ctx, q, inner, acked)
		}
		return acked, err
	}
	acked := make([]bool, len(receipts))
	defer func() { s.release(ctx, q, inner, acked) }()
	for _, name := range order {
		idx := byPart[name]
		rs := make([]string, len(idx))
		for j, i := range idx {
			rs[j] = inner[i]
		}
		got, err := s.st.Ack(ctx, name, rs)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			acked[i] = got[j]
		}
	}
	return acked, nil
}

// Nack gives a claimed message back after delay, or, if delay is nil, after
// a backoff by attempt: BackoffBase doubling per attempt up to BackoffMax,
// then a uniformly random half of it kept ("equal jitter").
func (s *Service) Nack(ctx context.Context, ns, queue, receipt string, delay *time.Duration) (store.Nacked, error) {
	if err := s.checkQueue(queue); err != nil {
		return store.Nacked{}, err
	}
	r, pt, err := s.receiptPart(store.Scope(ns, queue), "receipt", receipt)
	if err != nil {
		return store.Nacked{}, err
	}
	var d time.Duration
	if delay != nil {
		d = *delay
		if err := validate.Wait("delay", d, s.cfg.MaxDelay); err != nil {
			return store.Nacked{}, err
		}
	} else {
		_, attempt, _ := store.ParseReceipt(r)
		d = Backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, attempt, rand.Float64())
	}
	n, err := s.st.Nack(ctx, pt.name, r, d)
	if err == nil {
		s.release(ctx, store.Scope(ns, queue), []string{r}, []bool{true})
	}
	return n, err
}

// release ends the reservations of the claims of receipts that ended
// (ended[i]) on a partitioned queue q with caps; a failure leaves them
// to end by themselves.
func (s *Service) release(ctx context.Context, q string, receipts []string, ended []bool) {
	pq := s.parts[q]
	if capped, err := s.isCapped(ctx, q, pq); err != nil || !capped {
		return
	}
	var toks []string
	for i, r := range receipts {
		if ended[i] {
			toks = append(toks, receiptToken(r))
		}
	}
	if len(toks) > 0 {
		_ = s.st.ReleaseClaims(ctx, q, toks, false)
	}
}

// Backoff is the delay before attempt+1 after attempt failed: base doubled
// for every attempt after the first, capped at max, of which the upper half
// is scaled by jitter in [0, 1).
func Backoff(base, max time.Duration, attempt int, jitter float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		if d > max/2 {
			d = max // doubling would pass max (or overflow)
			break
		}
		d *= 2
	}
	d = min(d, max)
	return d/2 + time.Duration(jitter*float64(d/2))
}

// Extend sets a claim's visibility timeout to visibility from now.
func (s *Service) Extend(ctx context.Context, ns, queue, receipt string, visibility time.Duration) (time.Time, error) {
	if err := s.checkQueue(queue); err != nil {
		return time.Time{}, err
	}
	r, pt, err := s.receiptPart(store.Scope(ns, queue), "receipt", receipt)
	if err != nil {
		return time.Time{}, err
	}
	if err := validate.Duration("visibility_timeout", visibility, s.cfg.MaxVisibility); err != nil {
		return time.Time{}, err
	}
	t, err := s.st.ExtendClaim(ctx, pt.name, r, visibility)
	if q := store.Scope(ns, queue); err == nil && s.parts[q] != nil {
		if capped, cerr := s.isCapped(ctx, q, s.parts[q]); cerr == nil && capped {
			// A failure here lets the reservation end before the claim:
			// the claim is then uncounted until it ends.
			_ = s.st.HoldReservations(ctx, q, []string{receiptToken(r)}, visibility+reserveMargin)
		}
	}
	return t, err
}

// Stats counts a queue's messages by state: the sum over its partitions.
func (s *Service) Stats(ctx context.Context, ns, queue string) (store.QueueStats, error) {
	if err := s.checkQueue(queue); err != nil {
		return store.QueueStats{}, err
	}
	parts, _, err := s.partitionsOf(ctx, store.Scope(ns, queue))
	if err != nil {
		return store.QueueStats{}, err
	}
	var sum store.QueueStats
	for i, pt := range parts {
		st, err := s.st.Stats(ctx, pt.name)
		if err != nil {
			return store.QueueStats{}, err
		}
		if i == 0 {
			sum.Paused = st.Paused // Pause sets every partition alike
		}
		sum.Ready += st.Ready
		sum.Delayed += st.Delayed
		sum.InFlight += st.InFlight
		sum.Dead += st.Dead
	}
	return sum, nil
}

func (s *Service) checkQueue(queue string) error {
	return validate.Name("queue", queue, s.cfg.MaxNameBytes)
}
