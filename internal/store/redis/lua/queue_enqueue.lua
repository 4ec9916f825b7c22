-- Adds a message, or finds the one its dedup ID names; wakes the queue. A
-- message of a group whose head is taken waits behind it (gwait).
-- Arguments: queueEnqueueArgs (queue.go).
-- With replace, a dedup ID that names a message not claimed since its
-- enqueue or redrive replaces that message's payload, deliver time and
-- priority (store.NewMessage.Replace); one that names a message since
-- claimed, acked or dead adds a new message, which it names from then on.
-- Returns {OK, message ID, deliver} added; {DUPLICATE, first message ID,
-- its deliver} a duplicate; {REPLACED, message ID, deliver} replaced;
-- {QUEUE_FULL} the queue is full.
local deliver = now + delay
if deliverAt >= 0 then deliver = math.max(deliverAt, now) end

-- unplace takes ref (meta m, attempt 0) out of pending or ready, where a
-- message not yet claimed became ready at its deliver time, or, redriven,
-- at its enqueue time; false if it is found in neither (a group's head
-- that became ready at its turn before its deliver time was recorded as
-- that turn: it is then left as it is, and a new message enqueued).
local function unplace(ref, m)
  if redis.call('ZREM', kPending, ref) == 1 then return true end
  for _, due in ipairs({m.deliver, m.enqueued}) do
    if redis.call('ZREM', kReady, readyMember(ref, due)) == 1 then return true end
  end
  return false
end

if dedup ~= '' then
  local d = redis.call('HGET', kDedup, dedup)
  local exp = d and redis.call('ZSCORE', kDedupExp, dedup)
  if exp and tonumber(exp) > now then
    local did, ddeliver = string.match(d, '^(.*)|(%d+)$')
    if not did then corrupt('queue dedup record') end
    if not replace then return {DUPLICATE, did, tonumber(ddeliver)} end
    local m = getMeta(did)
    local ref = m and m.seq .. did
    local waiting = m and m.group ~= '' and redis.call('HGET', kGroupHeads, m.group) ~= ref
    if m and m.attempt == 0 and m.receipt == '' and (waiting or unplace(ref, m)) then
      m.deliver, m.prio = deliver, prio
      redis.call('HSET', kMsg, did, encoded)
      setMeta(did, m)
      if not waiting then place(ref, m, deliver) end
      redis.call('HSET', kDedup, dedup, did .. '|' .. s(deliver))
      redis.call('ZADD', kDedupExp, s(now + dedupWindow), dedup)
      expireDedup()
      redis.call('SPUBLISH', wakeChannel, '')
      persist()
      return {REPLACED, did, deliver}
    end
  end
end
if cap > 0 and redis.call('HLEN', kMsg) + redis.call('HLEN', kDeadMsg) >= cap then return {QUEUE_FULL} end
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
