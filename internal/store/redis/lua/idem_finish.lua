-- Stores the outcome of an owner's work and wakes the key's waiters.
-- KEYS[1]: the key
-- ARGV[3]: owner token  ARGV[4]: "c" result, "f" terminal failure,
--          "x" retryable failure (the key is deleted)
-- ARGV[5]: the encoded outcome  ARGV[6]: result ttl µs  ARGV[7]: wake-up channel
-- Returns OK stored; NO not the owner of a live processing key.
local cur = redis.call('HMGET', KEYS[1], 'st', 'own', 'dl', 'fp')
if cur[1] ~= 'p' or cur[2] ~= ARGV[3] or tonumber(cur[3]) <= now then return NO end
redis.call('DEL', KEYS[1])
if ARGV[4] ~= 'x' then
  local ex = now + tonumber(ARGV[6])
  redis.call('HSET', KEYS[1], 'st', ARGV[4], 'fp', cur[4], 'ex', s(ex), 'out', ARGV[5])
  expireAt(KEYS[1], ex)
end
redis.call('SPUBLISH', ARGV[7], '')
return OK
