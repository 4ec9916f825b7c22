-- Ends a live claim: the message is delayed for another attempt, or dead if
-- it has had its max attempts; wakes the queue.
-- KEYS: see queue_prelude.lua
-- ARGV[3]: receipt  ARGV[4]: delay µs  ARGV[5]: wake-up channel
-- Returns {0} the claim is not live; {1, deliver} delayed or ready; {2} dead.
upkeep()
local id, m, ref = claimed(ARGV[3])
if not id then return {0} end
redis.call('ZREM', KEYS[3], ref)
m.receipt = ''
if m.attempt >= m.max then
  setMeta(id, m)
  redis.call('RPUSH', KEYS[4], ref)
  return {2}
end
m.deliver = now + tonumber(ARGV[4])
setMeta(id, m)
if m.deliver > now then
  redis.call('ZADD', KEYS[2], s(m.deliver), ref)
else
  redis.call('RPUSH', KEYS[1], ref)
end
redis.call('SPUBLISH', ARGV[5], '')
return {1, m.deliver}
