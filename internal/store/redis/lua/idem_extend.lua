-- Extends the owner's processing lease, keeping the retention after it.
-- Arguments: idemExtendArgs (idem.go).
-- Returns {OK, the new deadline}; {NO} not the owner of a live processing key.
local cur = redis.call('HMGET', kKey, 'st', 'own', 'dl', 'ex')
if cur[1] ~= 'p' or cur[2] ~= owner or tonumber(cur[3]) <= now then return {NO} end
local deadline = now + ttl
local ex = deadline + (tonumber(cur[4]) - tonumber(cur[3]))
redis.call('HSET', kKey, 'dl', s(deadline), 'ex', s(ex))
expireAt(kKey, ex)
return {OK, deadline}
