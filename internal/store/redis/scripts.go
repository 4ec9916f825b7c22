package redis

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// One script per store operation, in lua/*.lua, each with its KEYS, ARGV and
// returns documented at its top. Every script starts with lua/prelude.lua
// (the time, and physical expiry); queue scripts also with
// lua/queue_prelude.lua (the queue's keys and its upkeep).

//go:embed lua/*.lua
var luaFiles embed.FS

func lua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("redis: missing script " + name) // a build mistake, caught by every test
	}
	return string(b)
}

// scriptSource is each script's source, for EVAL when Redis lacks it.
var scriptSource = map[*redis.Script]string{}

func newScript(src string) *redis.Script {
	sc := redis.NewScript(src)
	scriptSource[sc] = src
	return sc
}

func script(name string) *redis.Script { return newScript(lua("prelude") + lua(name)) }

func queueScript(name string) *redis.Script {
	return newScript(lua("prelude") + lua("queue_prelude") + lua(name))
}

var (
	lockAcquire = script("lock_acquire")
	lockRenew   = script("lock_renew")
	lockRelease = script("lock_release")
	lockGet     = script("lock_get")
	lockSession = script("lock_session")

	sessionCreate      = script("session_create")
	sessionRefresh     = script("session_refresh")
	sessionAddLock     = script("session_add_lock")
	sessionDeadline    = script("session_deadline")
	sessionRemoveLocks = script("session_remove_locks")
	sessionMarkLost    = script("session_mark_lost")
	sessionConfirmLock = script("session_confirm_lock")
	sessionClose       = script("session_close")
	sessionIndex       = script("session_index")

	limitFixedWindow   = script("limit_fixed_window")
	limitSlidingWindow = script("limit_sliding_window")
	limitSlidingLog    = script("limit_sliding_log")
	limitGCRA          = script("limit_gcra")

	idemBegin  = script("idem_begin")
	idemFinish = script("idem_finish")
	idemExtend = script("idem_extend")

	queueEnqueue = queueScript("queue_enqueue")
	queueClaim   = queueScript("queue_claim")
	queueAck     = queueScript("queue_ack")
	queueNack    = queueScript("queue_nack")
	queueExtend  = queueScript("queue_extend")
	queueStats   = queueScript("queue_stats")
	queueRedrive = queueScript("queue_redrive")
)

// allScripts are preloaded on every master, so that pipelined EVALSHA finds
// them.
var allScripts = []*redis.Script{
	lockAcquire, lockRenew, lockRelease, lockGet, lockSession,
	sessionCreate, sessionRefresh, sessionAddLock, sessionDeadline, sessionRemoveLocks, sessionMarkLost, sessionConfirmLock, sessionClose, sessionIndex,
	limitFixedWindow, limitSlidingWindow, limitSlidingLog, limitGCRA,
	idemBegin, idemFinish, idemExtend,
	queueEnqueue, queueClaim, queueAck, queueNack, queueExtend, queueStats, queueRedrive,
}
