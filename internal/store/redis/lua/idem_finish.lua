-- Stores the outcome of an owner's work and wakes the key's waiters.
-- Arguments: idemFinishArgs (idem.go).
-- Returns OK stored; NO not the owner of a live processing key.
local cur = redis.call('HMGET', kKey, 'st', 'own', 'dl', 'fp')
if cur[1] ~= 'p' or cur[2] ~= owner or tonumber(cur[3]) <= now then return NO end
redis.call('DEL', kKey)
if state ~= 'x' then
  local ex = now + ttl
  redis.call('HSET', kKey, 'st', state, 'fp', cur[4], 'ex', s(ex), 'out', outcome)
  expireAt(kKey, ex)
end
redis.call('SPUBLISH', channel, '')
return OK
