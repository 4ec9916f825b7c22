-- Extends the owner's processing lease, keeping the retention after it.
-- KEYS[1]: the key
-- ARGV[3]: owner token  ARGV[4]: processing ttl µs
-- Returns {OK, the new deadline}; {NO} not the owner of a live processing key.
local cur = redis.call('HMGET', KEYS[1], 'st', 'own', 'dl', 'ex')
if cur[1] ~= 'p' or cur[2] ~= ARGV[3] or tonumber(cur[3]) <= now then return {NO} end
local deadline = now + tonumber(ARGV[4])
local ex = deadline + (tonumber(cur[4]) - tonumber(cur[3]))
redis.call('HSET', KEYS[1], 'dl', s(deadline), 'ex', s(ex))
expireAt(KEYS[1], ex)
return {OK, deadline}
