-- Reads a live session's deadline.
-- KEYS[1]: the session
-- Returns the deadline, or 0 if the session is not live.
local deadline = tonumber(redis.call('HGET', KEYS[1], 'dl') or '0')
if deadline <= now then return 0 end
return deadline
