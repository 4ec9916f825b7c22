-- Moves dead letters, oldest first, back to ready with their attempts reset
-- (and a new place in the enqueue order: a message of a group goes behind
-- the group's messages, or is its head if it has none); wakes the queue if
-- it moved any.
-- Arguments: queueRedriveArgs (queue.go).
-- Returns how many it moved.
upkeep()
local kept = '(' .. s(now - deadTTL)
local n = 0
while n < max do
  -- The oldest dead letter, or a claim that ended on its last attempt and
  -- that upkeep left (more than a batch ended), whichever died first.
  local d, dd = firstIn(kDead, kept, '+inf')
  local l, ld = firstIn(kLast, kept, s(now))
  -- Each one's records are read before anything changes (see corrupt).
  if l and (not d or before(l, ld, d, dd)) then
    local id = string.sub(l, 17)
    local m = getMeta(id)
    if not m then corrupt('queue meta record missing') end
    local b = body(id)
    endLast(l, m) -- the group moves on first; revive wakes the queue anyway
    revive(id, m, b)
    n = n + 1
  elseif d then
    local id = string.sub(d, 17)
    local m, b = deadRecord(id)
    if not m then corrupt('queue dead letter record') end
    redis.call('ZREM', kDead, d)
    forgetDead(id)
    revive(id, m, b)
    n = n + 1
  else
    break
  end
end
if n > 0 then redis.call('SPUBLISH', wakeChannel, '') end
settle()
return n
