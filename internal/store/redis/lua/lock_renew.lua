-- Extends a plain lease held by a token.
-- KEYS[1]: the lock
-- ARGV[3]: token  ARGV[4]: ttl µs
-- Returns {OK, deadline, fence, now}; {NO} not held; {SESSION_BOUND} bound to
-- a session.
local cur = redis.call('HMGET', KEYS[1], 'tok', 'dl', 'ses', 'hold', 'fen')
if cur[1] ~= ARGV[3] or tonumber(cur[2]) <= now then return {NO} end
if cur[3] ~= '' then return {SESSION_BOUND} end
local deadline = now + tonumber(ARGV[4])
local hold = tonumber(cur[4])
if hold > 0 and hold < deadline then deadline = hold end
redis.call('HSET', KEYS[1], 'dl', s(deadline))
expireAt(KEYS[1], deadline)
return {OK, deadline, tonumber(cur[5]), now}
