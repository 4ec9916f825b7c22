-- Adds a hold (of any kind) to a live session's set, as a pending binding:
-- keepalives check it but do not renew it until session_confirm_hold.lua
-- confirms it.
-- KEYS[1]: the session  KEYS[2]: its holds  KEYS[3]: its loss reports
-- ARGV[3]: the hold's field ("kind:name")  ARGV[4]: pending entry
-- ARGV[5]: grace µs
-- ARGV[6]: most holds the session may have, of every kind, unacknowledged
-- reports included (0: no cap)
-- Returns {OK, the session's deadline}; {SESSION_GONE} it is not live;
-- {FULL} it has as many holds as it may.
local cur = redis.call('HMGET', KEYS[1], 'dl', 'closing')
local deadline = tonumber(cur[1] or '0')
if deadline <= now or cur[2] then return {SESSION_GONE} end
local max = tonumber(ARGV[6])
if max > 0 and redis.call('HLEN', KEYS[2]) + redis.call('HLEN', KEYS[3]) >= max then return {FULL} end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
expireAt(KEYS[2], stepUp(deadline + tonumber(ARGV[5])))
return {OK, deadline}
