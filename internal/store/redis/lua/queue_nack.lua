-- Ends a live claim: the message is delayed for another attempt, or dead if
-- it has had its max attempts; wakes the queue.
-- KEYS: see queue_prelude.lua
-- ARGV[4]: receipt  ARGV[5]: delay µs  ARGV[6]: wake-up channel
-- Returns {NO} the claim is not live; {OK, deliver} delayed or ready;
-- {DEAD} dead.
upkeep()
local id, m, ref, set = claimed(ARGV[4])
if not id then
  settle()
  return {NO}
end
m.receipt = ''
if m.attempt >= m.max then
  bury(id, m, ref, now) -- first: it reads the message (see corrupt)
  redis.call('ZREM', set, ref)
  settle()
  return {DEAD}
end
redis.call('ZREM', set, ref)
m.deliver = now + tonumber(ARGV[5])
setMeta(id, m)
redis.call('ZADD', KEYS[1], s(m.deliver), ref)
redis.call('SPUBLISH', ARGV[6], '')
settle()
return {OK, m.deliver}
