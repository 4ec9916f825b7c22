-- Adds a message, or finds the one its dedup ID names; wakes the queue. A
-- message of a group whose head is taken waits behind it (gwait).
-- Arguments: queueEnqueueArgs (queue.go).
-- Returns {OK, message ID, deliver} added; {DUPLICATE, first message ID,
-- its deliver} a duplicate; {QUEUE_FULL} the queue is full.
if dedup ~= '' then
  local d = redis.call('HGET', kDedup, dedup)
  local exp = d and redis.call('ZSCORE', kDedupExp, dedup)
  if exp and tonumber(exp) > now then
    local id, deliver = string.match(d, '^(.*)|(%d+)$')
    if not id then corrupt('queue dedup record') end
    return {DUPLICATE, id, tonumber(deliver)}
  end
end
if cap > 0 and redis.call('HLEN', kMsg) + redis.call('HLEN', kDeadMsg) >= cap then return {QUEUE_FULL} end
local deliver = now + delay
if deliverAt >= 0 then deliver = math.max(deliverAt, now) end
local m = {seq = nextSeq(), attempt = 0, max = maxAttempts, deliver = deliver, enqueued = now,
  prio = prio, group = group, receipt = ''}
local ref = m.seq .. id
redis.call('HSET', kMsg, id, encoded)
setMeta(id, m)
if group == '' or redis.call('HSETNX', kGroupHeads, group, ref) == 1 then
  place(ref, m, deliver)
else
  redis.call('ZADD', kGroupWait, 0, group .. '\0' .. ref)
end
if dedup ~= '' then
  redis.call('HSET', kDedup, dedup, id .. '|' .. s(deliver))
  redis.call('ZADD', kDedupExp, s(now + dedupWindow), dedup)
  expireDedup()
end
redis.call('SPUBLISH', wakeChannel, '')
persist() -- settle, knowing the queue has a live message: this one
return {OK, id, deliver}
