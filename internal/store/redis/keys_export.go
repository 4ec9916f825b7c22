package redis

import "github.com/coordd/coordd/internal/store"

// The key layout (keys.go) as tests outside the package need it: to find a
// key's Cluster node, or to read or change a key behind the store's back.
// These only wrap keys; the layout itself is keys.go's.

// LockKeys returns lock name's meta hash, which holds its fence counter
// (field LockFenceField) and a plain exclusive holder's token (field
// LockHolderField), and its holders hash (token -> record) for the others
// (shared, session-bound), under prefix. name is the store's name of the
// lock: "namespace:name" for the server's locks.
func LockKeys(prefix, name string) (meta, holders string) {
	k := keys{prefix: prefix}.hold(store.HoldLock, name)
	return k[holdMeta], k[0]
}

// The fields of a lock's meta hash that LockKeys names (lua/hold_prelude.lua).
const (
	LockFenceField  = "f"
	LockHolderField = "ht"
)

// SessionKeys returns session id's hash, set of holds and loss reports under
// prefix.
func SessionKeys(prefix, id string) (hash, holds, lost string) {
	k := keys{prefix: prefix}.session(id)
	return k[0], k[1], k[2]
}

// QueueKeyNames are a queue's keys.
type QueueKeyNames struct {
	Pending, Inflight, Last, Dead, Msg, Meta, DeadMsg, Dedup, DedupExp, Seq string
}

// QueueKeys returns queue name's keys under prefix.
func QueueKeys(prefix, name string) QueueKeyNames {
	k := keys{prefix: prefix}.queue(name)
	return QueueKeyNames{
		Pending: k[0], Inflight: k[1], Last: k[2], Dead: k[3], Msg: k[4], Meta: k[5],
		DeadMsg: k[6], Dedup: k[7], DedupExp: k[8], Seq: k[9],
	}
}

// LimiterTag returns the hash tag that every key of key's limiters starts
// with under prefix: a key in their Cluster slot.
func LimiterTag(prefix, key string) string { return keys{prefix: prefix}.tag("r", key) }

// IdemKey returns idempotency key's record under prefix.
func IdemKey(prefix, key string) string { return keys{prefix: prefix}.idem(key) }

// HoldField is the field of a session's hold of kind on name, in the
// session's holds hash.
func HoldField(kind store.HoldKind, name string) string { return holdField(kind, name) }

// HoldKeys returns the keys of (kind, name) under prefix, in the order
// lua/hold_prelude.lua documents.
func HoldKeys(prefix string, kind store.HoldKind, name string) []string {
	return keys{prefix: prefix}.hold(kind, name)
}
