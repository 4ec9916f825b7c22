-- Reads a live session's deadline, how many places of its cap are taken
-- (its holds of every kind and its unacknowledged loss reports) and its
-- lock-delay.
-- KEYS[1]: the session  KEYS[2]: its holds  KEYS[3]: its loss reports
-- Returns {OK, deadline, taken, lock-delay µs}, or {SESSION_GONE} if the session is not
-- live.
local cur = redis.call('HMGET', KEYS[1], 'dl', 'closing', 'ld')
local deadline = tonumber(cur[1] or '0')
if deadline <= now or cur[2] then return {SESSION_GONE} end
return {OK, deadline, redis.call('HLEN', KEYS[2]) + redis.call('HLEN', KEYS[3]), tonumber(cur[3] or '0')}
