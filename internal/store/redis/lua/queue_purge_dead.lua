-- Deletes dead letters (dead, or claims that ended on their last attempt
-- and that upkeep left), oldest death first, for good; a group whose head
-- was one moves on (waking the queue if its next message is ready).
-- Arguments: queueRedriveArgs (queue.go).
-- Returns {how many it deleted, how many dead letters remain}.
upkeep()
local t, kept = s(now), '(' .. s(now - deadTTL)
local n, woke = 0, false
while n < max do
  local d, dd = firstIn(kDead, kept, '+inf')
  local l, ld = firstIn(kLast, kept, t)
  if l and (not d or before(l, ld, d, dd)) then
    local id = string.sub(l, 17)
    local m = getMeta(id)
    if not m then corrupt('queue meta record missing') end
    woke = endLast(l, m) or woke
    redis.call('HDEL', kMsg, id)
    redis.call('HDEL', kMeta, id)
  elseif d then
    redis.call('ZREM', kDead, d)
    forgetDead(string.sub(d, 17))
  else
    break
  end
  n = n + 1
end
if woke then redis.call('SPUBLISH', wakeChannel, '') end
settle()
return {n, redis.call('ZCOUNT', kDead, kept, '+inf') + redis.call('ZCOUNT', kLast, kept, t)}
