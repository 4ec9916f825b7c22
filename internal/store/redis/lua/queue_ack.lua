-- Deletes the messages of live claims.
-- KEYS: see queue_prelude.lua  ARGV[4], ...: receipts (at most
-- queue.max_claim_messages: bounded work)
-- Returns, per receipt, OK deleted or NO its claim is not live.
upkeep()
local out = {}
for i = 4, #ARGV do
  local id, _, ref, set = claimed(ARGV[i])
  if id then
    redis.call('ZREM', set, ref)
    redis.call('HDEL', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
    out[#out + 1] = OK
  else
    out[#out + 1] = NO
  end
end
settle()
return out
