package queue

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// Bounds of the dead-letter RPCs.
const (
	DefaultDeadPageSize = 50
	MaxDeadPageSize     = 500
	DefaultDeadPreview  = 256
	MaxDeadPreview      = 4096
	DefaultPurge        = 1000
	MaxPurge            = 10000
)

// Redrive moves dead letters back to ready: up to max of them, oldest
// first, partition after partition (0 means MaxClaimMessages, and at most
// 10 times that), or, with ids (at most 10 times MaxClaimMessages, and max
// 0), exactly those of ids that are dead letters, in every partition.
func (s *Service) Redrive(ctx context.Context, ns, queue string, max int, ids []string) (int, error) {
	if err := s.checkQueue(queue); err != nil {
		return 0, err
	}
	limit := 10 * s.cfg.MaxClaimMessages
	if len(ids) > 0 {
		if max != 0 {
			return 0, validate.Errorf("max_messages", "and message_ids are both set; set one")
		}
		if len(ids) > limit {
			return 0, validate.Errorf("message_ids", "has %d IDs; the limit is %d", len(ids), limit)
		}
		for i, id := range ids {
			if !store.ValidMessageID(id) {
				return 0, validate.Errorf(fmt.Sprintf("message_ids[%d]", i), "is not a message ID (32 lowercase hex digits)")
			}
		}
	}
	if max == 0 {
		max = s.cfg.MaxClaimMessages
	}
	if max < 1 || max > limit {
		return 0, validate.Errorf("max_messages", "is %d; it must be between 1 and %d", max, limit)
	}
	parts, _, err := s.partitionsOf(ctx, store.Scope(ns, queue))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pt := range parts {
		var m int
		if len(ids) > 0 {
			m, err = s.st.RedriveIDs(ctx, pt.name, ids)
		} else {
			m, err = s.st.Redrive(ctx, pt.name, max-n)
		}
		n += m
		if err != nil {
			return n, err
		}
		if n == max && len(ids) == 0 {
			break
		}
	}
	return n, nil
}

// DeadPage is a page of dead letters.
type DeadPage struct {
	DeadLetters []store.DeadLetter
	Next        string // the next page's token; "" at the end
}

// ListDead lists a page of a queue's dead letters: pageSize of them (0:
// DefaultDeadPageSize), each with preview bytes of its payload (0:
// DefaultDeadPreview), after the position of token ("" for the first
// page). Partitions are listed one after the other, in the order of
// (partition count, partition), each oldest death first; a page asks each
// partition it reaches once, and the partitions after a full page once more
// each at most to find out whether the page is the last.
func (s *Service) ListDead(ctx context.Context, ns, queue string, pageSize, preview int, token string) (DeadPage, error) {
	if err := s.checkQueue(queue); err != nil {
		return DeadPage{}, err
	}
	if pageSize == 0 {
		pageSize = DefaultDeadPageSize
	}
	if pageSize < 1 || pageSize > MaxDeadPageSize {
		return DeadPage{}, validate.Errorf("page_size", "is %d; it must be between 1 and %d", pageSize, MaxDeadPageSize)
	}
	if preview == 0 {
		preview = DefaultDeadPreview
	}
	if preview < 1 || preview > MaxDeadPreview {
		return DeadPage{}, validate.Errorf("preview_bytes", "is %d; it must be between 1 and %d", preview, MaxDeadPreview)
	}
	q := store.Scope(ns, queue)
	tok, err := parsePageToken(q, token)
	if err != nil {
		return DeadPage{}, err
	}
	parts, _, err := s.partitionsOf(ctx, q)
	if err != nil {
		return DeadPage{}, err
	}
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b part) int {
		if a.k != b.k {
			return a.k - b.k
		}
		return a.p - b.p
	})
	i, pos := 0, store.DeadPos{}
	if token != "" {
		i = slices.IndexFunc(parts, func(pt part) bool { return pt.k == tok.k && pt.p == tok.p })
		if i < 0 {
			return DeadPage{}, validate.Errorf("page_token", "is not a page token of this queue")
		}
		pos = tok.pos
	}
	var page DeadPage
	for ; i < len(parts); i, pos = i+1, (store.DeadPos{}) {
		want := pageSize - len(page.DeadLetters) + 1 // one more tells whether there are more
		got, err := s.st.ListDead(ctx, parts[i].name, pos, want, preview)
		if err != nil {
			return DeadPage{}, err
		}
		if len(got) > want {
			return DeadPage{}, fmt.Errorf("queue: store listed %d dead letters, asked for %d", len(got), want)
		}
		if len(got) == want {
			take := want - 1
			page.DeadLetters = append(page.DeadLetters, got[:take]...)
			at := pos
			if take > 0 {
				at = got[take-1].Pos()
			}
			page.Next = pageToken{k: parts[i].k, p: parts[i].p, pos: at}.encode(q)
			return page, nil
		}
		page.DeadLetters = append(page.DeadLetters, got...)
	}
	return page, nil
}

// PurgeDead deletes up to max dead letters (0: DefaultPurge), oldest
// first, partition after partition, and counts those left in every
// partition.
func (s *Service) PurgeDead(ctx context.Context, ns, queue string, max int) (purged, remaining int64, err error) {
	if err := s.checkQueue(queue); err != nil {
		return 0, 0, err
	}
	if max == 0 {
		max = DefaultPurge
	}
	if max < 1 || max > MaxPurge {
		return 0, 0, validate.Errorf("max_messages", "is %d; it must be between 1 and %d", max, MaxPurge)
	}
	parts, _, err := s.partitionsOf(ctx, store.Scope(ns, queue))
	if err != nil {
		return 0, 0, err
	}
	for _, pt := range parts {
		p, r, err := s.st.PurgeDead(ctx, pt.name, max-int(purged))
		purged += p
		if err != nil {
			return purged, 0, err
		}
		remaining += r
	}
	return purged, remaining, nil
}

// pageToken is a position in the listing of a queue's dead letters: in
// partition p of k, after pos (the zero pos: the partition's start).
type pageToken struct {
	k, p int
	pos  store.DeadPos
}

// The token is "1.<queue hash>.<k>.<p>.<dead µs>.<seq>.<ID>" in unpadded
// URL-safe base64; the hash of the scoped queue name keeps a token from
// being used on another queue (or in another namespace) by mistake.
func (t pageToken) encode(q string) string {
	at := int64(0)
	if !t.pos.DeadTime.IsZero() {
		at = t.pos.DeadTime.UnixMicro()
	}
	s := fmt.Sprintf("1.%08x.%d.%d.%d.%d.%s", hash32(q), t.k, t.p, at, t.pos.Seq, t.pos.ID)
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// parsePageToken reads a token of queue q ("": none). Anything else is
// INVALID_ARGUMENT naming page_token, without quoting it.
func parsePageToken(q, token string) (pageToken, error) {
	var t pageToken
	if token == "" {
		return t, nil
	}
	bad := validate.Errorf("page_token", "is not a page token of this queue")
	if len(token) > 256 {
		return t, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return t, bad
	}
	f := strings.Split(string(b), ".")
	if len(f) != 7 || f[0] != "1" || f[1] != fmt.Sprintf("%08x", hash32(q)) {
		return t, bad
	}
	k, err1 := strconv.Atoi(f[2])
	p, err2 := strconv.Atoi(f[3])
	at, err3 := strconv.ParseInt(f[4], 10, 64)
	seq, err4 := strconv.ParseUint(f[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || k < 1 || k > store.MaxPartitions || p < 0 || p >= k || at < 0 {
		return t, bad
	}
	t.k, t.p = k, p
	if at == 0 {
		if seq != 0 || f[6] != "" {
			return t, bad
		}
		return t, nil
	}
	if !store.ValidMessageID(f[6]) {
		return t, bad
	}
	t.pos = store.DeadPos{DeadTime: time.UnixMicro(at).UTC(), Seq: seq, ID: f[6]}
	return t, nil
}
