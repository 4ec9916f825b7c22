-- Deletes the messages of live claims; the next message of a group whose
-- head is acked becomes its head (waking the queue if it is ready).
-- Arguments: queueAckArgs (queue.go).
-- Returns, per receipt, OK deleted or NO its claim is not live.
local out, woke, freed = {}, false, 0
for _, receipt in ipairs(receipts) do
  local id, m, ref, set = claimed(receipt)
  if id then
    redis.call('ZREM', set, ref)
    redis.call('HDEL', kMsg, id)
    redis.call('HDEL', kMeta, id)
    if m.group ~= '' then woke = advance(m.group) or woke end
    out[#out + 1] = OK
    freed = freed + 1
  else
    out[#out + 1] = NO
  end
end
if woke then
  redis.call('SPUBLISH', wakeChannel, '')
elseif freed > 0 then
  wakeIfCapped(freed)
end
settle()
return out
