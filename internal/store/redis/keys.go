package redis

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// Every key and wake-up channel is built here. The keys of one hold name
// (a lock, a semaphore, an election), one session, one limiter, one
// idempotency key or one queue share a hash tag — {l:NAME}, {m:NAME},
// {e:NAME}, {s:ID}, {r:KEY}, {i:KEY}, {q:NAME} — so that each script touches
// a single Cluster slot, and its channel (a shard channel, for SPUBLISH from
// inside the script) hashes to the same slot.
//
// A name may contain '{' or '}': the tag then ends at the name's first '}',
// which is the same for every key of the object, since they all share the
// prefix up to the end of the name and add suffixes without braces. Two
// objects' keys never collide: a key's suffix has no '}', so the object is
// the part up to the key's last '}'.

type keys struct{ prefix string }

func (k keys) tag(kind, name string) string { return k.prefix + ":{" + kind + ":" + name + "}" }

// holdTags maps each hold kind to the tag kind of its names' keys.
var holdTags = map[store.HoldKind]string{store.HoldLock: "l", store.HoldSemaphore: "m", store.HoldElection: "e"}

// errUnknownKind: a hold kind holdTags lacks.
var errUnknownKind = errors.New("redis: unknown hold kind")

// holdBase returns the tag base of (kind, name): its keys and channels
// are it plus a suffix. An unknown kind is a programming bug (the store's
// callers pass the store's kinds), as in channel.
func (k keys) holdBase(kind store.HoldKind, name string) string {
	tag, ok := holdTags[kind]
	if !ok {
		panic(fmt.Errorf("%w %q", errUnknownKind, kind))
	}
	return k.tag(tag, name)
}

// keyPart is one key of an object's key set: the Lua local a script binds
// it to (scripts.go), and its suffix after the object's tag.
type keyPart struct{ lua, suffix string }

// names lists the Lua names of parts, for newScript.
func names(parts []keyPart) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.lua
	}
	return out
}

// build returns the keys of parts under tag t.
func build(t string, parts []keyPart) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = t + p.suffix
	}
	return out
}

// holdKeyParts are the keys of one (kind, name), as lua/hold_prelude.lua
// documents them.
var holdKeyParts = []keyPart{
	{"kHolders", ":h"}, {"kByDeadline", ":dl"}, {"kBySession", ":hs"},
	{"kTickets", ":q"}, {"kTicketLeases", ":ql"}, {"kTicketInfo", ":qi"}, {"kExclusive", ":qx"},
	{"kMeta", ":m"}, {"kLog", ":log"},
}

var holdKeyNames = names(holdKeyParts)

// holdMeta is the index of kMeta in holdKeyParts.
var holdMeta = slices.Index(holdKeyNames, "kMeta")

// hold returns the keys of (kind, name), in holdKeyParts' order.
func (k keys) hold(kind store.HoldKind, name string) []string {
	return build(k.holdBase(kind, name), holdKeyParts)
}

// sessionKeyParts are a session's hash, its holds (of every kind) and its
// loss reports.
var sessionKeyParts = []keyPart{{"kSession", ""}, {"kHolds", ":holds"}, {"kLost", ":lost"}}

var sessionKeyNames = names(sessionKeyParts)

// session returns a session's keys, in sessionKeyParts' order.
func (k keys) session(id string) []string { return build(k.tag("s", id), sessionKeyParts) }

// sessionIndex returns a namespace's index of live sessions.
func (k keys) sessionIndex(ns string) string { return k.tag("sn", ns) }

// limit returns the keys of key's limiter under l, apart for every distinct
// limit.
func (k keys) limit(key string, l store.Limit) []string {
	t := k.tag("r", key) + ":" + strconv.Itoa(int(l.Algorithm)) + ":" + strconv.FormatInt(l.Limit, 10) +
		":" + strconv.FormatInt(l.Period.Microseconds(), 10) + ":" + strconv.FormatInt(l.Burst, 10)
	if l.Algorithm == store.SlidingLog {
		return []string{t, t + ":sum"}
	}
	return []string{t}
}

// counter returns the key of key's hit counter of a period
// (store.Limits.CountHits), apart from its limiters.
func (k keys) counter(key string, period time.Duration) string {
	return k.tag("rc", key) + ":" + strconv.FormatInt(period.Microseconds(), 10)
}

func (k keys) idem(key string) string { return k.tag("i", key) }

// queueKeyParts are a queue's keys, as lua/queue_prelude.lua documents
// them.
var queueKeyParts = []keyPart{
	{"kPending", ":pending"}, {"kInflight", ":inflight"}, {"kLast", ":last"}, {"kDead", ":dead"},
	{"kMsg", ":msg"}, {"kMeta", ":meta"}, {"kDeadMsg", ":deadmsg"}, {"kDedup", ":dedup"},
	{"kDedupExp", ":dedupexp"}, {"kSeq", ":seq"}, {"kReady", ":ready"}, {"kGroupHeads", ":gheads"},
	{"kGroupWait", ":gwait"}, {"kConf", ":conf"}, {"kDeadPrev", ":deadprev"},
}

// queueEnqueueKeys is how many of a queue's keys queue_enqueue.lua binds:
// those up to kGroupWait (it reads neither the settings nor previews).
const queueEnqueueKeys = 13

var queueKeyNames = names(queueKeyParts)

// queue returns a queue's keys, in queueKeyParts' order.
func (k keys) queue(name string) []string { return build(k.tag("q", name), queueKeyParts) }

// queueParts returns the set of a queue's partition counts
// (queue_partitionings.lua), in the queue's own slot.
func (k keys) queueParts(name string) string { return k.tag("q", name) + ":parts" }

// topicTags maps the kind of a store topic (the prefix store.ElectionTopic,
// IdemTopic, QueueTopic and SessionTopic give it) to the tag kind of its
// object's keys, whose slot its channel shares.
// A wait topic (store.WaitTopic: "wait:kind:instance:name") has its own
// channel per instance in the name's slot.
var topicTags = map[string]string{"elect": "e", "idem": "i", "queue": "q", "session": "s", "wait": ""}

// errUnknownTopic: a topic none of store's topic functions made.
var errUnknownTopic = errors.New("redis: unknown topic kind")

// topicChannel returns the shard channel of a store topic, or
// errUnknownTopic. The error names the kind only: a session topic's name is
// a session ID, which never reaches a log.
func (k keys) topicChannel(topic string) (string, error) {
	kind, name, ok := strings.Cut(topic, ":")
	if !ok {
		return "", fmt.Errorf("%w: no kind", errUnknownTopic)
	}
	tag, ok := topicTags[kind]
	if !ok {
		return "", fmt.Errorf("%w %q", errUnknownTopic, kind)
	}
	if kind == "wait" {
		hk, rest, ok1 := strings.Cut(name, ":")
		instance, name, ok2 := strings.Cut(rest, ":")
		tag, ok3 := holdTags[store.HoldKind(hk)]
		if !ok1 || !ok2 || !ok3 {
			return "", fmt.Errorf("%w: a wait topic without a hold kind and an instance", errUnknownTopic)
		}
		return k.tag(tag, name) + ":w:" + instance, nil
	}
	return k.tag(tag, name) + ":ev", nil
}

// channel is topicChannel for the store's own calls, which build their
// topics with store.ElectionTopic and the like: an unknown kind there is a
// programming bug, never a client's input (Subscribe, which takes its
// topic from outside, checks it with topicChannel).
func (k keys) channel(topic string) string {
	ch, err := k.topicChannel(topic)
	if err != nil {
		panic(err)
	}
	return ch
}
