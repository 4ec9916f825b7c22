-- Deletes the messages of live claims; the next message of a group whose
-- head is acked becomes its head (waking the queue if it is ready).
-- KEYS: see queue_prelude.lua  ARGV[5], ...: receipts (at most
-- queue.max_claim_messages: bounded work)
-- Returns, per receipt, OK deleted or NO its claim is not live.
local out, woke = {}, false
for i = 5, #ARGV do
  local id, m, ref, set = claimed(ARGV[i])
  if id then
    redis.call('ZREM', set, ref)
    redis.call('HDEL', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
    if m.group ~= '' then woke = advance(m.group) or woke end
    out[#out + 1] = OK
  else
    out[#out + 1] = NO
  end
end
if woke then redis.call('SPUBLISH', wakeChannel, '') end
settle()
return out
