package redis

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// One script per store operation, in lua/*.lua, each with its KEYS, ARGV and
// returns documented at its top. Every script starts with lua/prelude.lua
// (the time, and physical expiry); queue scripts also with
// lua/queue_prelude.lua (the queue's keys and its upkeep), hold scripts
// (every kind: locks, semaphores, elections) with lua/hold_prelude.lua,
// and limit_allow.lua with lua/limit_prelude.lua (the algorithms).

//go:embed lua/*.lua
var luaFiles embed.FS

func lua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("redis: missing script " + name) // a build mistake, caught by every test
	}
	return string(b)
}

// script is one of the store's Lua scripts: its name (its file in lua/),
// its whole source (for EVAL when Redis lacks it) and its SHA.
type script struct {
	name string
	src  string
	*redis.Script
}

// allScripts is the registry: every script, preloaded on every node, so
// that pipelined EVALSHA finds them. newScript adds to it.
var allScripts []*script

// newScript registers script name, after lua/prelude.lua and the given
// preludes.
func newScript(name string, preludes ...string) *script {
	src := lua("prelude")
	for _, p := range preludes {
		src += lua(p)
	}
	src += lua(name)
	sc := &script{name: name, src: src, Script: redis.NewScript(src)}
	allScripts = append(allScripts, sc)
	return sc
}

func queueScript(name string) *script { return newScript(name, "queue_prelude") }

func holdScript(name string) *script { return newScript(name, "hold_prelude") }

var (
	holdAcquire    = holdScript("hold_acquire")
	holdRenew      = holdScript("hold_renew")
	holdRelease    = holdScript("hold_release")
	holdGet        = holdScript("hold_get")
	holdSession    = holdScript("hold_session")
	holdLeave      = holdScript("hold_leave")
	holdTickets    = holdScript("hold_tickets")
	holdCheckFence = holdScript("hold_check_fence")

	electionProclaim = holdScript("election_proclaim")
	electionGet      = holdScript("election_get")

	sessionCreate      = newScript("session_create")
	sessionRefresh     = newScript("session_refresh")
	sessionAddHold     = newScript("session_add_hold")
	sessionDeadline    = newScript("session_deadline")
	sessionRemoveHolds = newScript("session_remove_holds")
	sessionMarkLost    = newScript("session_mark_lost")
	sessionConfirmHold = newScript("session_confirm_hold")
	sessionClose       = newScript("session_close")
	sessionIndex       = newScript("session_index")

	limitAllow = newScript("limit_allow", "limit_prelude")

	idemBegin  = newScript("idem_begin")
	idemFinish = newScript("idem_finish")
	idemExtend = newScript("idem_extend")

	queueEnqueue    = queueScript("queue_enqueue")
	queueClaim      = queueScript("queue_claim")
	queueAck        = queueScript("queue_ack")
	queueNack       = queueScript("queue_nack")
	queueExtend     = queueScript("queue_extend")
	queueStats      = queueScript("queue_stats")
	queueRedrive    = queueScript("queue_redrive")
	queueRedriveIDs = queueScript("queue_redrive_ids")
	queueListDead   = queueScript("queue_list_dead")
	queuePurgeDead  = queueScript("queue_purge_dead")

	queuePartitionings = newScript("queue_partitionings")
)
