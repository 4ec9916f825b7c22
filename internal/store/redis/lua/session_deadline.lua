-- Reads a live session's deadline, how many places of its cap are taken
-- (its holds of every kind and its unacknowledged loss reports) and its
-- lock-delay, and its ttl.
-- Keys: the session's (keys.go, sessionKeyParts).
-- Returns {OK, deadline, taken, lock-delay µs, ttl µs}, or {SESSION_GONE}
-- if the session is not live.
local cur = redis.call('HMGET', kSession, 'dl', 'closing', 'ld', 'ttl')
local deadline = tonumber(cur[1] or '0')
if deadline <= now or cur[2] then return {SESSION_GONE} end
return {OK, deadline, redis.call('HLEN', kHolds) + redis.call('HLEN', kLost), tonumber(cur[3] or '0'), tonumber(cur[4] or '0')}
