-- Reads a live session's deadline and how many places of its lock cap are
-- taken (its locks and its unacknowledged loss reports).
-- KEYS[1]: the session  KEYS[2]: its lock set  KEYS[3]: its loss reports
-- Returns {deadline, taken}, or {0, 0} if the session is not live.
local cur = redis.call('HMGET', KEYS[1], 'dl', 'closing')
local deadline = tonumber(cur[1] or '0')
if deadline <= now or cur[2] then return {0, 0} end
return {deadline, redis.call('HLEN', KEYS[2]) + redis.call('HLEN', KEYS[3])}
