-- Deletes dead letters (dead, or claims that ended on their last attempt
-- and that upkeep left), oldest death first, for good; a group whose head
-- was one moves on (waking the queue if its next message is ready).
-- KEYS: see queue_prelude.lua  ARGV[5]: at most this many (bounded work:
-- at most store.MaxPurgeDead)
-- Returns {how many it deleted, how many dead letters remain}.
upkeep()
local max = tonumber(ARGV[5])
local t, kept = s(now), '(' .. s(now - deadTTL)
local n, woke = 0, false
while n < max do
  local d, dd = firstIn(KEYS[4], kept, '+inf')
  local l, ld = firstIn(KEYS[3], kept, t)
  if l and (not d or before(l, ld, d, dd)) then
    local id = string.sub(l, 17)
    local m = getMeta(id)
    if not m then corrupt('queue meta record missing') end
    woke = endLast(l, m) or woke
    redis.call('HDEL', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
  elseif d then
    redis.call('ZREM', KEYS[4], d)
    redis.call('HDEL', KEYS[7], string.sub(d, 17))
  else
    break
  end
  n = n + 1
end
if woke then redis.call('SPUBLISH', wakeChannel, '') end
settle()
return {n, redis.call('ZCOUNT', KEYS[4], kept, '+inf') + redis.call('ZCOUNT', KEYS[3], kept, t)}
