package redlock

import (
	"crypto/sha1"
	"encoding/hex"
)

// script is a Lua script and its SHA1, for EVALSHA.
type script struct{ src, hash string }

func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	return script{src, hex.EncodeToString(h[:])}
}

// The scripts run on each master alone, each on one lock's two keys, which
// share the hash tag {rl:NAME}: KEYS[1], the lock (a hash: t token, n the
// try's nonce, o owner, f fence, m the deadline max_hold allows in µs of
// that master's clock, 0 for none), and KEYS[2], the name's fence counter.
// Times are the master's own (TIME), in µs.

// acquireScript takes the lock for token ARGV[1] in try ARGV[5] (owner
// ARGV[2]) for ARGV[3] ms, with max_hold ARGV[4] µs (0: none), unless
// another token holds it. A record of the same token from an earlier try
// (a timed-out attempt whose undo was lost) is taken over afresh: a new
// nonce, the lease from now. ARGV[6] is the fence the grant proposes
// (kept ARGV[7] s): if it is above the name's fence counter, at least this
// master's clock and at most ARGV[8] µs above it (a coordd whose clock
// runs far ahead must not carry fences where no clock follows), the
// counter is raised to it and the record holds it; otherwise the record
// has no fence yet (0) and the counter is left alone, for the grant's
// second round (commitScript). Returns {1, 1 if
// the proposal was taken else 0, 0, counter before, now} taken, {0,
// owner, pttl ms, fence, now, token} held by another (the token stays in
// coordd: it tells holders apart).
var acquireScript = newScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cur = redis.call('HMGET', KEYS[1], 't', 'o', 'f')
if cur[1] and cur[1] ~= ARGV[1] then
  return {0, cur[2] or '', redis.call('PTTL', KEYS[1]), tonumber(cur[3] or '0'), now, cur[1]}
end
local max, ttl = 0, tonumber(ARGV[3])
if ARGV[4] ~= '0' then
  max = now + tonumber(ARGV[4])
  ttl = math.min(ttl, math.floor(tonumber(ARGV[4]) / 1000))
end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local p, f = tonumber(ARGV[6]), '0'
if c < p and now <= p and p <= now + tonumber(ARGV[8]) then
  redis.call('SET', KEYS[2], ARGV[6], 'EX', ARGV[7])
  f = ARGV[6]
end
redis.call('HSET', KEYS[1], 't', ARGV[1], 'n', ARGV[5], 'o', ARGV[2], 'f', f, 'm', string.format('%d', max))
redis.call('PEXPIRE', KEYS[1], math.max(ttl, 1))
return {1, f == '0' and 0 or 1, 0, c, now}
`)

// commitScript raises the fence counter to ARGV[2] (kept ARGV[3] s), and,
// if try ARGV[4] of token ARGV[1] holds the lock, records its fence.
// Returns {1, held}: the counter is at least the fence.
var commitScript = newScript(`
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) > c then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) end
local cur = redis.call('HMGET', KEYS[1], 't', 'n')
if cur[1] == ARGV[1] and cur[2] == ARGV[4] then
  redis.call('HSET', KEYS[1], 'f', ARGV[2])
  return {1, 1}
end
return {1, 0}
`)

// renewScript extends ARGV[1]'s live lock to ARGV[2] ms from now, capped
// by its max_hold deadline; never brings back an expired one, nor extends
// a try that has no fence yet. Returns {1, ttl ms, fence} renewed, {0}
// not held.
var renewScript = newScript(`
local cur = redis.call('HMGET', KEYS[1], 't', 'm', 'f')
if cur[1] ~= ARGV[1] or cur[3] == '0' then return {0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
local m = tonumber(cur[2])
if m > 0 and now + ttl * 1000 > m then ttl = math.floor((m - now) / 1000) end
if ttl <= 0 then return {0} end
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, ttl, tonumber(cur[3])}
`)

// releaseScript deletes the lock if token ARGV[1] holds it, and, with a
// nonce ARGV[2] (the undo of one try), only if that try's record is
// there. Returns 1 deleted, 0 not held.
var releaseScript = newScript(`
local cur = redis.call('HMGET', KEYS[1], 't', 'n')
if cur[1] == ARGV[1] and (ARGV[2] == '' or cur[2] == ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// getScript reads the lock: {token, owner, fence, pttl ms}, or {} free.
var getScript = newScript(`
local cur = redis.call('HMGET', KEYS[1], 't', 'o', 'f')
if not cur[1] then return {} end
return {cur[1], cur[2] or '', tonumber(cur[3] or '0'), redis.call('PTTL', KEYS[1])}
`)
