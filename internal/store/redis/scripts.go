package redis

import (
	"embed"
	"fmt"
	"reflect"
	"strings"

	"github.com/redis/go-redis/v9"
)

// One script per store operation, in lua/*.lua, each documented at its top
// (what it does, what it returns). Every script starts with lua/prelude.lua
// (the time, and physical expiry); queue scripts also with
// lua/queue_prelude.lua (the queue's keys and its upkeep), hold scripts
// (every kind: locks, semaphores, elections) with lua/hold_prelude.lua,
// and limit_allow.lua with lua/limit_prelude.lua (the algorithms).
//
// No script reads KEYS or ARGV by number. Each is declared here with the
// names of its keys (the key set's, from keys.go) and a struct of its
// arguments, whose fields, in order, are its ARGV after the time's two
// (timeArgs); newScript writes, before the preludes, the one place that
// binds each to a Lua local of that name (header), converted as the
// field's lua tag says:
//
//	`lua:"token"`         a string
//	`lua:"ttl,int"`       tonumber
//	`lua:"shared,bool"`   true for "1" (go-redis sends a bool as 1 or 0)
//	`lua:"tickets,rest"`  every remaining value, as a table of strings
//	`lua:"params,intrest"` every remaining value, as a table of numbers
//
// Each struct's argv method lists its values in field order; go-redis
// sends them as ARGV. TestScriptDeclarations checks that argv follows the
// fields, that the scripts read no KEYS or ARGV themselves, and that each
// binds only names it uses.

//go:embed lua/*.lua
var luaFiles embed.FS

func lua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("redis: missing script " + name) // a build mistake, caught by every test
	}
	return string(b)
}

// scriptArgs is a script's arguments after the time's: a struct whose
// fields are tagged as above, of the type its script was declared with
// (script.argv lists them).
type scriptArgs any

// noArgs is the arguments of a script that takes only the time.
type noArgs struct{}

// argField is one bound argument: its Lua name and conversion, and where
// it is in the arguments struct.
type argField struct {
	name, conv string
	index      []int
}

// script is one of the store's Lua scripts: its name (its file in lua/),
// its whole source (for EVAL when Redis lacks it) and its SHA, and the
// names its KEYS and ARGV are bound to.
type script struct {
	name     string
	src      string
	keys     []string
	args     []argField
	argsType reflect.Type
	*redis.Script
}

// allScripts is the registry: every script, preloaded on every node, so
// that pipelined EVALSHA finds them. newScript adds to it.
var allScripts []*script

// newScript registers script name: the header binding keys (the Lua
// names of its KEYS, in order; one ending in "..." takes the rest, as a
// table) and args' fields, then lua/prelude.lua, the given preludes and
// the script.
func newScript(name string, keys []string, args scriptArgs, preludes ...string) *script {
	t := reflect.TypeOf(args)
	fields := argFields(t)
	src := header(keys, fields) + lua("prelude")
	for _, p := range preludes {
		src += lua(p)
	}
	src += lua(name)
	sc := &script{name: name, src: src, keys: keys, args: fields, argsType: t, Script: redis.NewScript(src)}
	allScripts = append(allScripts, sc)
	return sc
}

// argFields lists the fields of an arguments struct in order, those of an
// embedded struct in its place.
func argFields(t reflect.Type, at ...int) []argField {
	var out []argField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		index := append(append([]int(nil), at...), i)
		if f.Anonymous {
			out = append(out, argFields(f.Type, index...)...)
			continue
		}
		tag, ok := f.Tag.Lookup("lua")
		if !ok {
			panic(fmt.Sprintf("redis: %s.%s has no lua tag", t.Name(), f.Name))
		}
		name, conv, _ := strings.Cut(tag, ",")
		out = append(out, argField{name, conv, index})
	}
	return out
}

// argv lists a call's arguments: the time arguments (Store.timeArgs),
// then args' values in the order the header binds them, a rest field's
// elements in its place, in one slice. args of another type than the
// script's is a programming bug, as an unknown kind is in keys.go.
func (sc *script) argv(timeArgs []any, args scriptArgs) []any {
	v := reflect.ValueOf(args)
	if v.Type() != sc.argsType {
		panic(fmt.Sprintf("redis: script %s takes %s, not %s", sc.name, sc.argsType, v.Type()))
	}
	out := make([]any, 0, len(timeArgs)+len(sc.args)+4)
	out = append(out, timeArgs...)
	for _, f := range sc.args {
		fv := v.FieldByIndex(f.index)
		if f.conv == "rest" || f.conv == "intrest" {
			for i := range fv.Len() {
				out = append(out, fv.Index(i).Interface())
			}
			continue
		}
		out = append(out, fv.Interface())
	}
	return out
}

// header is the Lua that binds keys and fields to locals: the first lines
// of a script.
func header(keys []string, fields []argField) string {
	var b strings.Builder
	b.WriteString("-- KEYS and ARGV bound by name (scripts.go)\n")
	rest := func(name, from, table, conv string) {
		fmt.Fprintf(&b, "local %s = {}\nfor i = %s, #%s do %s[#%s + 1] = %s(%s[i]) end\n", name, from, table, name, name, conv, table)
	}
	for i, k := range keys {
		if name, ok := strings.CutSuffix(k, "..."); ok {
			rest(name, fmt.Sprint(i+1), "KEYS", "")
			break
		}
		fmt.Fprintf(&b, "local %s = KEYS[%d]\n", k, i+1)
	}
	b.WriteString("local now, slack = tonumber(ARGV[1]), tonumber(ARGV[2])\n")
	for i, f := range fields {
		n := i + 3
		switch f.conv {
		case "":
			fmt.Fprintf(&b, "local %s = ARGV[%d]\n", f.name, n)
		case "int":
			fmt.Fprintf(&b, "local %s = tonumber(ARGV[%d])\n", f.name, n)
		case "bool":
			fmt.Fprintf(&b, "local %s = ARGV[%d] == '1'\n", f.name, n)
		case "rest":
			rest(f.name, fmt.Sprint(n), "ARGV", "")
		case "intrest":
			rest(f.name, fmt.Sprint(n), "ARGV", "tonumber")
		default:
			panic("redis: unknown lua conversion " + f.conv)
		}
	}
	return b.String()
}

func queueScript(name string, args scriptArgs) *script {
	return newScript(name, queueKeyNames, args, "queue_prelude")
}

func holdScript(name string, args scriptArgs) *script {
	return newScript(name, holdKeyNames, args, "hold_record", "hold_prelude")
}

// soloScript: a lock's solo script (lua/hold_*_solo.lua), on its meta only.
func soloScript(name string, args scriptArgs) *script {
	return newScript(name, []string{"kMeta"}, args, "hold_record")
}

var (
	holdAcquire    = holdScript("hold_acquire", holdAcquireArgs{})
	holdRenew      = holdScript("hold_renew", holdRenewArgs{})
	holdRelease    = holdScript("hold_release", holdReleaseArgs{})
	holdGet        = holdScript("hold_get", holdArgs{})
	holdSession    = holdScript("hold_session", holdSessionArgs{})
	holdLeave      = holdScript("hold_leave", holdLeaveArgs{})
	holdTickets    = holdScript("hold_tickets", holdTicketsArgs{})
	holdCheckFence = holdScript("hold_check_fence", holdCheckFenceArgs{})

	holdAcquireSolo = soloScript("hold_acquire_solo", holdAcquireSoloArgs{})
	holdReleaseSolo = soloScript("hold_release_solo", holdReleaseSoloArgs{})

	electionProclaim = holdScript("election_proclaim", electionProclaimArgs{})
	electionGet      = holdScript("election_get", electionGetArgs{})

	sessionCreate      = newScript("session_create", sessionKeyNames, sessionCreateArgs{})
	sessionRefresh     = newScript("session_refresh", sessionKeyNames, sessionRefreshArgs{})
	sessionAddHold     = newScript("session_add_hold", sessionKeyNames, sessionAddHoldArgs{})
	sessionDeadline    = newScript("session_deadline", sessionKeyNames, noArgs{})
	sessionMarkLost    = newScript("session_mark_lost", sessionKeyNames, sessionMarkLostArgs{})
	sessionConfirmHold = newScript("session_confirm_hold", sessionKeyNames[:2], sessionConfirmHoldArgs{})
	sessionClose       = newScript("session_close", sessionKeyNames, sessionCloseArgs{})
	sessionIndex       = newScript("session_index", []string{"kIndex"}, sessionIndexArgs{})
	sessionVouch       = newScript("session_vouch", sessionKeyNames[:2], sessionVouchArgs{})
	sessionHoldsKept   = newScript("session_holds_kept", sessionKeyNames[:1], sessionHoldsKeptArgs{})
	sessionLives       = newScript("session_lives", sessionKeyNames[:1], noArgs{})

	limitAllow = newScript("limit_allow", []string{"limiterKeys..."}, limitAllowArgs{}, "limit_prelude")
	limitHits  = newScript("limit_hits", []string{"kCounter"}, limitHitsArgs{})

	idemBegin  = newScript("idem_begin", []string{"kKey"}, idemBeginArgs{})
	idemFinish = newScript("idem_finish", []string{"kKey"}, idemFinishArgs{})
	idemExtend = newScript("idem_extend", []string{"kKey"}, idemExtendArgs{})

	queueEnqueue    = newScript("queue_enqueue", queueKeyNames[:queueEnqueueKeys], queueEnqueueArgs{}, "queue_prelude")
	queueClaim      = queueScript("queue_claim", queueClaimArgs{})
	queueAck        = queueScript("queue_ack", queueAckArgs{})
	queueNack       = queueScript("queue_nack", queueNackArgs{})
	queueExtend     = queueScript("queue_extend", queueExtendArgs{})
	queueStats      = queueScript("queue_stats", queueArgs{})
	queueRedrive    = queueScript("queue_redrive", queueRedriveArgs{})
	queueRedriveIDs = queueScript("queue_redrive_ids", queueRedriveIDsArgs{})
	queueListDead   = queueScript("queue_list_dead", queueListDeadArgs{})
	queuePurgeDead  = queueScript("queue_purge_dead", queueRedriveArgs{})
	queueConf       = queueScript("queue_conf", queueConfArgs{})
	queueSlots      = newScript("queue_slots", append(queueKeyNames[:len(queueKeyNames):len(queueKeyNames)], "kSlots"), queueSlotsArgs{}, "queue_prelude")

	schedulePut    = newScript("schedule_put", scheduleKeyNames, schedulePutArgs{})
	scheduleDelete = newScript("schedule_delete", scheduleKeyNames, scheduleArgs{})
	scheduleTicked = newScript("schedule_ticked", scheduleKeyNames[:1], scheduleTickedArgs{})
	scheduleRead   = newScript("schedule_read", scheduleKeyNames, scheduleReadArgs{})

	queueActivity = newScript("queue_activity", []string{"kHist"}, queueActivityArgs{})
	queueRegistry = newScript("queue_registry", []string{"kNames"}, queueRegistryArgs{})

	queuePartitionings = newScript("queue_partitionings", []string{"kParts"}, queuePartitioningsArgs{})

	policyPut    = newScript("policy_put", policyKeyNames, policyPutArgs{})
	policyDelete = newScript("policy_delete", policyKeyNames, policyArgs{})
	policyRead   = newScript("policy_read", policyKeyNames, policyReadArgs{})

	layoutCheck = newScript("layout_check", []string{"kLayout"}, layoutArgs{})
)

// ScriptSource returns script name's source as the store runs it (the
// header binding its keys and arguments, the preludes, the script) and
// its arguments after the two every script takes (the time and the slack:
// ARGV[3] on), in order, each as its lua tag ("ttl,int": the Lua name and
// its conversion); false if there is no such script. It is for tools that
// run the store's scripts without the store (coordbench's direct
// baseline), so that they pass arguments by name.
func ScriptSource(name string) (src string, args []string, ok bool) {
	for _, sc := range allScripts {
		if sc.name == name {
			for _, f := range sc.args {
				args = append(args, strings.TrimSuffix(f.name+","+f.conv, ","))
			}
			return sc.src, args, true
		}
	}
	return "", nil, false
}
