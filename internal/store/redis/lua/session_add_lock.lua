-- Adds a lock to a live session's set, as a pending binding: keepalives
-- check it but do not renew it until session_confirm_lock.lua confirms it.
-- KEYS[1]: the session  KEYS[2]: its lock set  KEYS[3]: its loss reports
-- ARGV[3]: lock name  ARGV[4]: pending entry  ARGV[5]: grace µs
-- ARGV[6]: most locks the session may hold, unacknowledged reports
-- included (0: no cap)
-- Returns the session's deadline; 0 if it is not live; -1 if it holds as
-- many locks as it may.
local cur = redis.call('HMGET', KEYS[1], 'dl', 'closing')
local deadline = tonumber(cur[1] or '0')
if deadline <= now or cur[2] then return 0 end
local max = tonumber(ARGV[6])
if max > 0 and redis.call('HLEN', KEYS[2]) + redis.call('HLEN', KEYS[3]) >= max then return -1 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
expireAt(KEYS[2], deadline + tonumber(ARGV[5]))
return deadline
