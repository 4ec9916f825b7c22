-- Reads a live session's deadline and how many locks it holds.
-- KEYS[1]: the session  KEYS[2]: its lock set
-- Returns {deadline, locks}, or {0, 0} if the session is not live.
local deadline = tonumber(redis.call('HGET', KEYS[1], 'dl') or '0')
if deadline <= now then return {0, 0} end
return {deadline, redis.call('HLEN', KEYS[2])}
