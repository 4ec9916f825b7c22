-- Confirms a pending binding (session_add_hold.lua): from now on the
-- session's keepalives renew the hold.
-- KEYS[1]: the session  KEYS[2]: its holds
-- ARGV[3]: the hold's field ("kind:name")  ARGV[4]: the binding's token
-- ARGV[5]: confirmed entry
-- ARGV[6]: the session's wake-up channel (its stream learns of the hold)
-- Returns {OK, the session's deadline}; {SESSION_GONE} the session is not
-- live; {NO} the entry is no longer the binding's (lost, released or
-- expired meanwhile).
local cur = redis.call('HMGET', KEYS[1], 'dl', 'closing')
local deadline = tonumber(cur[1] or '0')
if deadline <= now or cur[2] then return {SESSION_GONE} end
local entry = redis.call('HGET', KEYS[2], ARGV[3])
if not entry or string.sub(entry, 1, #ARGV[4] + 1) ~= ARGV[4] .. ' ' then return {NO} end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[5])
redis.call('SPUBLISH', ARGV[6], '')
return {OK, deadline}
