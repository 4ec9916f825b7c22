-- Ends a live claim: the message is delayed for another attempt (still its
-- group's head), or dead if it has had its max attempts; wakes the queue.
-- Arguments: queueNackArgs (queue.go).
-- Returns {NO} the claim is not live; {OK, deliver} delayed or ready;
-- {DEAD} dead.
local id, m, ref, set = claimed(receipt)
if not id then
  return {NO}
end
m.receipt = ''
if m.attempt >= m.max then
  redis.call('ZREM', set, ref)
  if bury(id, m, ref, now) then redis.call('SPUBLISH', wakeChannel, '') else wakeIfCapped(1) end
  settle()
  return {DEAD}
end
redis.call('ZREM', set, ref)
m.deliver = now + delay
setMeta(id, m)
place(ref, m, now)
redis.call('SPUBLISH', wakeChannel, '')
settle()
return {OK, m.deliver}
