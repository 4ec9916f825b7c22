package redis

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// TestScriptReplyDecoders checks the decoders of the limit, idempotency and
// queue scripts' replies: each good reply decodes to what its script means,
// and a short, mistyped or unexpected one is errCorrupt naming the script.
func TestScriptReplyDecoders(t *testing.T) {
	type good struct {
		reply any
		want  any
		err   error // a state error it means
	}
	type decoder struct {
		script *script
		decode func(*redis.Cmd) (any, error)
		good   []good
		bad    []any
	}
	ok, no := int64(codeOK), int64(codeNo)
	msg := store.Message{ID: "m", Payload: []byte("p"), Receipt: "r", Attempt: 1, MaxAttempts: 3,
		DeliverTime: unixMicro(10), EnqueueTime: unixMicro(5), ExpireTime: unixMicro(20), Priority: 4, Group: "g"}
	claimed := []any{int64(7), int64(0), "m", encodeMessage([]byte("p")), "r", int64(1), int64(3), int64(10), int64(5), int64(20), int64(4), "g"}
	mistyped := append([]any{}, claimed...)
	mistyped[5] = "1"
	decoders := []decoder{
		{limitAllow, func(c *redis.Cmd) (any, error) { return decodeDecision(c, 2) },
			[]good{
				{[]any{ok, int64(5), int64(0), int64(100), int64(0)}, store.Decision{Allowed: true, Remaining: 5, ResetAfter: 100 * time.Microsecond}, nil},
				{[]any{no, int64(0), int64(30), int64(100), int64(1)}, store.Decision{RetryAfter: 30 * time.Microsecond, ResetAfter: 100 * time.Microsecond, Limit: 1}, nil},
			},
			[]any{[]any{}, []any{ok, int64(5), int64(0), int64(100)}, []any{ok, "5", int64(0), int64(100), int64(0)},
				[]any{int64(2), int64(5), int64(0), int64(100), int64(0)}, []any{ok, int64(5), int64(0), int64(100), int64(2)},
				[]any{ok, int64(5), int64(0), int64(100), int64(-1)}, int64(1)}},
		{idemBegin, func(c *redis.Cmd) (any, error) { return decodeBegin(c) },
			[]good{
				{[]any{int64(codeMismatch)}, store.IdemState{}, store.ErrFingerprintMismatch},
				{[]any{ok, int64(store.Execute), int64(100), int64(40)},
					store.IdemState{Outcome: store.Execute, ExpireTime: unixMicro(100), TTL: 60 * time.Microsecond}, nil},
				{[]any{ok, int64(store.InProgress), int64(100), int64(40)},
					store.IdemState{Outcome: store.InProgress, ExpireTime: unixMicro(100), TTL: 60 * time.Microsecond}, nil},
				{[]any{ok, int64(store.Completed), int64(100), int64(40), "res"},
					store.IdemState{Outcome: store.Completed, ExpireTime: unixMicro(100), TTL: 60 * time.Microsecond, Result: []byte("res")}, nil},
				{[]any{ok, int64(store.Failed), int64(100), int64(40), "why"},
					store.IdemState{Outcome: store.Failed, ExpireTime: unixMicro(100), TTL: 60 * time.Microsecond, Failure: &store.Failure{Message: "why"}}, nil},
			},
			[]any{[]any{}, []any{ok}, []any{no, int64(1), int64(100), int64(40)}, []any{int64(-1)},
				[]any{ok, int64(5), int64(100), int64(40)}, []any{ok, int64(store.Completed), int64(100), int64(40)},
				[]any{ok, int64(store.Failed), int64(100), int64(40), int64(3)}, []any{ok, int64(store.Execute), "100", int64(40)}}},
		{idemFinish, func(c *redis.Cmd) (any, error) { return nil, decodeFinish(c) },
			[]good{{ok, nil, nil}, {no, nil, store.ErrNotOwner}},
			[]any{int64(2), int64(-1), []any{ok}, "1"}},
		{idemExtend, func(c *redis.Cmd) (any, error) { return decodeIdemExtend(c) },
			[]good{{[]any{ok, int64(100)}, unixMicro(100), nil}, {[]any{no}, time.Time{}, store.ErrNotOwner}},
			[]any{[]any{ok}, []any{}, []any{ok, "100"}, []any{int64(100)}, int64(100)}},
		{queueEnqueue, func(c *redis.Cmd) (any, error) { return decodeEnqueue(c) },
			[]good{
				{[]any{ok, "m", int64(100)}, store.Enqueued{ID: "m", DeliverTime: unixMicro(100)}, nil},
				{[]any{int64(codeDuplicate), "m", int64(100)}, store.Enqueued{ID: "m", DeliverTime: unixMicro(100), Duplicate: true}, nil},
			},
			[]any{[]any{ok, "m"}, []any{int64(codeDuplicate)}, []any{no, "m", int64(100)}, []any{ok, int64(1), int64(100)}, []any{int64(1), "m", "100"}}},
		{queueClaim, func(c *redis.Cmd) (any, error) { return decodeClaim(c) },
			[]good{
				{[]any{int64(0), int64(0)}, store.Claimed{}, nil},
				{[]any{int64(0), int64(3)}, store.Claimed{HeldBack: "claim_rate"}, nil},
				{claimed, store.Claimed{NextDue: 7 * time.Microsecond, Messages: []store.Message{msg}}, nil},
				{append(append([]any{}, claimed...), claimed[2:]...), store.Claimed{NextDue: 7 * time.Microsecond, Messages: []store.Message{msg, msg}}, nil},
			},
			[]any{[]any{}, []any{int64(0)}, []any{int64(0), int64(4)}, []any{int64(0), int64(-1)}, claimed[:3], claimed[:11],
				append(append([]any{}, claimed...), "m"), mistyped, []any{"7", int64(0)}}},
		{queueAck, func(c *redis.Cmd) (any, error) { return decodeAck(c, 2) },
			[]good{{[]any{ok, no}, []bool{true, false}, nil}, {[]any{no, ok}, []bool{false, true}, nil}},
			[]any{[]any{ok}, []any{ok, no, ok}, []any{ok, int64(2)}, []any{ok, "1"}, []any{}, int64(1)}},
		{queueNack, func(c *redis.Cmd) (any, error) { return decodeNack(c) },
			[]good{
				{[]any{no}, store.Nacked{}, store.ErrReceiptExpired},
				{[]any{int64(codeDead)}, store.Nacked{Dead: true}, nil},
				{[]any{ok, int64(100)}, store.Nacked{DeliverTime: unixMicro(100)}, nil},
			},
			[]any{[]any{ok}, []any{}, []any{int64(2)}, []any{"1", int64(100)}, []any{ok, "100"}}},
		{queueExtend, func(c *redis.Cmd) (any, error) { return decodeQueueExtend(c) },
			[]good{{[]any{ok, int64(100)}, unixMicro(100), nil}, {[]any{no}, time.Time{}, store.ErrReceiptExpired}},
			[]any{[]any{ok}, []any{}, []any{ok, "100"}, []any{int64(codeDead)}, int64(0)}},
		{queueStats, func(c *redis.Cmd) (any, error) { return decodeStats(c) },
			[]good{
				{[]any{int64(1), int64(2), int64(3), int64(4), int64(0)}, store.QueueStats{Ready: 1, Delayed: 2, InFlight: 3, Dead: 4}, nil},
				{[]any{int64(0), int64(0), int64(0), int64(0), int64(1)}, store.QueueStats{Paused: true}, nil},
			},
			[]any{[]any{int64(1), int64(2), int64(3), int64(4)}, []any{int64(1), int64(2), "3", int64(4), int64(0)}, int64(1)}},
		{queueRedrive, func(c *redis.Cmd) (any, error) { return decodeRedrive(c) },
			[]good{{int64(3), 3, nil}, {int64(0), 0, nil}},
			[]any{int64(-1), []any{}, "3"}},
		{queueRedriveIDs, func(c *redis.Cmd) (any, error) { return decodeRedriveIDs(c, 3) },
			[]good{{int64(3), 3, nil}, {int64(0), 0, nil}},
			[]any{int64(-1), int64(4), []any{}, "3"}},
		{queuePurgeDead, func(c *redis.Cmd) (any, error) {
			p, r, err := decodePurgeDead(c, 5)
			return [2]int64{p, r}, err
		},
			[]good{{[]any{int64(2), int64(7)}, [2]int64{2, 7}, nil}, {[]any{int64(0), int64(0)}, [2]int64{0, 0}, nil}},
			[]any{[]any{int64(6), int64(0)}, []any{int64(-1), int64(0)}, []any{int64(1)}, []any{int64(1), int64(2), int64(3)}, []any{int64(1), "2"}, int64(1)}},
		{queueListDead, func(c *redis.Cmd) (any, error) {
			d, err := decodeListDead(c, 1, 2)
			return fmt.Sprint(d), err
		},
			[]good{
				{[]any{}, fmt.Sprint([]store.DeadLetter(nil)), nil},
				{[]any{"id", "\x01ab", int64(5), int64(2), int64(100), int64(200), int64(3), "g", "000000000000000a"},
					fmt.Sprint([]store.DeadLetter{{ID: "id", Preview: []byte("ab"), Size: 5, Attempts: 2, EnqueueTime: unixMicro(100), DeadTime: unixMicro(200), Priority: 3, Group: "g", Seq: 10}}), nil},
			},
			[]any{
				[]any{"id"},
				[]any{"id", "\x01abc", int64(5), int64(2), int64(100), int64(200), int64(3), "g", "000000000000000a"},
				[]any{"id", "\x02ab", int64(5), int64(2), int64(100), int64(200), int64(3), "g", "000000000000000a"},
				[]any{"id", "\x01ab", int64(1), int64(2), int64(100), int64(200), int64(3), "g", "000000000000000a"},
				[]any{"id", "\x01ab", int64(5), int64(2), int64(100), int64(200), int64(3), "g", "xyz"},
				[]any{"id", "\x01ab", "5", int64(2), int64(100), int64(200), int64(3), "g", "000000000000000a"},
			}},
	}
	cmd := func(v any) *redis.Cmd {
		c := redis.NewCmd(t.Context())
		c.SetVal(v)
		return c
	}
	for _, d := range decoders {
		for _, g := range d.good {
			got, err := d.decode(cmd(g.reply))
			if g.err != nil {
				if !errors.Is(err, g.err) {
					t.Errorf("%s: reply %v: %v, want %v", d.script.name, g.reply, err, g.err)
				}
				continue
			}
			if err != nil || !reflect.DeepEqual(got, g.want) {
				t.Errorf("%s: reply %v decoded %+v, %v, want %+v", d.script.name, g.reply, got, err, g.want)
			}
		}
		for _, v := range d.bad {
			if _, err := d.decode(cmd(v)); !isBug(err) || !strings.Contains(err.Error(), d.script.name) {
				t.Errorf("%s: reply %#v: %v, want errCorrupt naming the script", d.script.name, v, err)
			}
		}
	}
	// A message record coordd cannot read is errCorrupt too.
	bad := append([]any{}, claimed...)
	bad[3] = "\x02p"
	if _, err := decodeClaim(cmd(bad)); !errors.Is(err, errCorrupt) {
		t.Errorf("queue_claim with a message record of version 2: %v, want errCorrupt", err)
	}
}

// TestReplyCodeNumbersDistinct checks that no two reply codes share a
// number, so that a reply never means two things (and that two codes added
// apart do not meet unnoticed).
func TestReplyCodeNumbersDistinct(t *testing.T) {
	names := map[int64]string{}
	for name, v := range replyCodes {
		if other, ok := names[v]; ok {
			t.Errorf("reply codes %s and %s are both %d", name, other, v)
		}
		names[v] = name
	}
	if _, ok := names[codeBad]; ok {
		t.Errorf("a reply code is codeBad's %d", int64(codeBad))
	}
}

// TestIdemOutcomesMatchTheStore checks that lua/idem_begin.lua numbers
// outcomes as store.Outcome does.
func TestIdemOutcomesMatchTheStore(t *testing.T) {
	m := regexp.MustCompile(`(?m)^local EXECUTE, IN_PROGRESS, COMPLETED, FAILED = (\d+), (\d+), (\d+), (\d+)$`).FindStringSubmatch(lua("idem_begin"))
	if m == nil {
		t.Fatal("idem_begin.lua does not declare its outcomes")
	}
	for i, want := range []store.Outcome{store.Execute, store.InProgress, store.Completed, store.Failed} {
		if n, _ := strconv.Atoi(m[i+1]); store.Outcome(n) != want {
			t.Errorf("idem_begin.lua's outcome %d is %d, store's %d", i, n, want)
		}
	}
}
