-- Adds a lock to a live session's set.
-- KEYS[1]: the session  KEYS[2]: its lock set
-- ARGV[3]: lock name  ARGV[4]: entry  ARGV[5]: grace µs
-- Returns the session's deadline, or 0 if it is not live.
local deadline = tonumber(redis.call('HGET', KEYS[1], 'dl') or '0')
if deadline <= now then return 0 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
expireAt(KEYS[2], deadline + tonumber(ARGV[5]))
return deadline
