package queue

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// Partitioned is a queue spread over several partitions (config
// queue.partitioned), each a store queue of its own placed on its own
// shard (store.Queues.PartitionName).
type Partitioned struct {
	Namespace  string `mapstructure:"namespace"`
	Name       string `mapstructure:"name"`
	Partitions int    `mapstructure:"partitions"`
}

// PartitionRefresh is how often an instance re-reads a partitioned
// queue's record of partitionings (store.Queues.Partitionings), to visit
// the partitions another instance's configuration added.
const PartitionRefresh = 10 * time.Second

// part is one partition of a queue: partition p of k, and its store name.
type part struct {
	k, p int
	name string
}

// receiptSuffix tags the receipt of a message of part: none for the queue
// itself (1 partition), otherwise k and p in two hex digits each, so that
// Ack, Nack and Extend find the partition without asking the store.
func (pt part) receiptSuffix() string {
	if pt.k == 1 {
		return ""
	}
	return fmt.Sprintf("%02x%02x", pt.k, pt.p)
}

// partitioned is a configured queue's state: its partition count k, the
// partitionings recorded for it (the partitions that may hold its
// messages), and a round-robin counter for messages with neither group nor
// dedup ID.
type partitioned struct {
	k    int
	next atomic.Uint32

	mu         sync.Mutex
	parts      []part // every partition of every recorded partitioning: this k's first
	fetched    time.Time
	refreshing bool

	// capped: the queue has caps (read every SettingsRefresh), so that its
	// claims take reservations first (store.Queues.ReserveClaims).
	capMu      sync.Mutex
	capped     bool
	capFetched time.Time
}

// SettingsRefresh is how often an instance re-reads whether a partitioned
// queue has caps: a cap set takes effect on every instance within it.
const SettingsRefresh = time.Second

// reserveMargin is how much longer a reservation lasts than the claim it
// is for: the claim's deadline is set a little later, by another master's
// clock.
const reserveMargin = time.Second

// isCapped reports whether the partitioned queue q has caps, read at most
// SettingsRefresh ago.
func (s *Service) isCapped(ctx context.Context, q string, pq *partitioned) (bool, error) {
	if pq == nil {
		return false, nil
	}
	pq.capMu.Lock()
	capped, fetched := pq.capped, pq.capFetched
	pq.capMu.Unlock()
	if !fetched.IsZero() && time.Since(fetched) < SettingsRefresh {
		return capped, nil
	}
	c, err := s.st.QueueSettings(ctx, q) // outside the lock: claimers do not queue behind a slow read
	if err != nil {
		if !fetched.IsZero() {
			return capped, nil // the last answer stands
		}
		return false, err
	}
	pq.capMu.Lock()
	defer pq.capMu.Unlock()
	pq.capped, pq.capFetched = c.MaxInFlight > 0 || c.RateLimit > 0, time.Now()
	return pq.capped, nil
}

// receiptToken is the claim token in a store receipt (store.MakeReceipt).
func receiptToken(receipt string) string { return receipt[store.ReceiptLen-32:] }

// partitionsOf returns the partitions of queue q (scoped) to visit, this
// instance's k's first, and the state of a configured queue (nil for one
// that is not: its one partition is q itself). The record of
// partitionings is read (and this k added to it) on first use and every
// PartitionRefresh after; until the first read succeeds the queue fails,
// so that no message goes to a partition the record lacks.
func (s *Service) partitionsOf(ctx context.Context, q string) ([]part, *partitioned, error) {
	pq := s.parts[q]
	if pq == nil {
		return []part{{k: 1, p: 0, name: q}}, nil, nil
	}
	pq.mu.Lock()
	parts, stale := pq.parts, time.Since(pq.fetched) >= PartitionRefresh
	if parts != nil && (!stale || pq.refreshing) {
		pq.mu.Unlock()
		return parts, pq, nil
	}
	pq.refreshing = true
	pq.mu.Unlock()
	ks, err := s.st.Partitionings(ctx, q, pq.k)
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.refreshing = false
	if err != nil {
		if pq.parts != nil {
			return pq.parts, pq, nil // this k is recorded: the last list stands
		}
		return nil, nil, err
	}
	pq.parts, pq.fetched = s.partList(q, pq.k, ks), time.Now()
	return pq.parts, pq, nil
}

// partList lists the partitions of every partitioning in ks, k's first.
func (s *Service) partList(q string, k int, ks []int) []part {
	var out []part
	for _, n := range append([]int{k}, ks...) {
		if n == k && len(out) > 0 {
			continue
		}
		for p := range n {
			out = append(out, part{k: n, p: p, name: s.st.PartitionName(q, p, n)})
		}
	}
	return out
}

// enqueuePart is the partition a message goes to: its group's (all of a
// group's messages in one partition, so that its order and one-at-a-time
// hold), else its dedup ID's (so that a duplicate meets the original),
// else the next in turn.
func (pq *partitioned) enqueuePart(parts []part, group, dedupID string) part {
	var i uint32
	switch {
	case group != "":
		i = hash32(group)
	case dedupID != "":
		i = hash32(dedupID)
	default:
		i = pq.next.Add(1)
	}
	return parts[i%uint32(pq.k)] // parts starts with this k's partitions
}

func hash32(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

// rotate returns parts with this k's partitions starting at the next one in
// turn, so that claims spread over them; the other partitionings' after.
func (pq *partitioned) rotate(parts []part) []part {
	if pq == nil || pq.k == 1 {
		return parts
	}
	out := make([]part, 0, len(parts))
	start := int(pq.next.Add(1) % uint32(pq.k))
	out = append(out, parts[start:pq.k]...)
	out = append(out, parts[:start]...)
	return append(out, parts[pq.k:]...)
}

// receiptPart splits a receipt into the store's receipt and the partition
// it names (the queue itself when it names none), or reports it malformed.
func (s *Service) receiptPart(q, field, receipt string) (string, part, error) {
	pt := part{k: 1, name: q}
	if len(receipt) == store.ReceiptLen+4 {
		k, ok1 := hexByte(receipt[store.ReceiptLen:])
		p, ok2 := hexByte(receipt[store.ReceiptLen+2:])
		if !ok1 || !ok2 || k < 2 || k > store.MaxPartitions || p >= k {
			return "", part{}, validate.Errorf(field, "is malformed: want the receipt Claim returned")
		}
		pt = part{k: k, p: p, name: s.st.PartitionName(q, p, k)}
		receipt = receipt[:store.ReceiptLen]
	}
	if receipt == "" {
		return "", part{}, validate.Errorf(field, "is required")
	}
	if _, _, ok := store.ParseReceipt(receipt); !ok {
		return "", part{}, validate.Errorf(field, "is malformed: want the receipt Claim returned")
	}
	return receipt, pt, nil
}

// hexByte reads two lowercase hex digits (one spelling per value, as in
// the rest of a receipt, so that two spellings never pass as two
// receipts).
func hexByte(s string) (int, bool) {
	n := 0
	for _, c := range []byte(s[:2]) {
		switch {
		case c >= '0' && c <= '9':
			n = n*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n*16 + int(c-'a'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// checkPartitioned checks the config's partitioned queues.
func checkPartitioned(v *validate.Checks, ps []Partitioned, maxName int) {
	seen := map[string]int{}
	for i, p := range ps {
		field := fmt.Sprintf("queue.partitioned[%d]", i)
		if err := validate.Name(field+".namespace", p.Namespace, maxName); err != nil {
			v.Add(err)
		}
		if err := validate.Name(field+".name", p.Name, maxName); err != nil {
			v.Add(err)
		}
		if p.Partitions < 1 || p.Partitions > store.MaxPartitions {
			v.Bad(field+".partitions", "is %d; it must be between 1 and %d", p.Partitions, store.MaxPartitions)
		}
		q := store.Scope(p.Namespace, p.Name)
		if j, ok := seen[q]; ok {
			v.Bad(field, "names the queue of queue.partitioned[%d] again", j)
		}
		seen[q] = i
	}
}
