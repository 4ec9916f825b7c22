-- Hands out ready messages, each with a fresh receipt.
-- KEYS: see queue_prelude.lua
-- ARGV[3]: visibility timeout µs  ARGV[4], ...: one claim token per message wanted
-- Returns {next due µs, then per message: ID, encoded message, receipt,
-- attempt, max attempts, deliver, enqueue time, claim deadline}.
upkeep()
local deadline = now + tonumber(ARGV[3])
local out = {0}
local n = #ARGV - 3
local refs = redis.call('LPOP', KEYS[1], n)
if refs then
  for i = 1, #refs do
    local ref = refs[i]
    local id = string.sub(ref, 17)
    local m = getMeta(id)
    m.attempt = m.attempt + 1
    m.receipt = id .. string.format('%08x', m.attempt) .. ARGV[3 + i]
    setMeta(id, m)
    redis.call('ZADD', KEYS[3], s(deadline), ref)
    local body = redis.call('HGET', KEYS[5], id)
    for _, v in ipairs({id, body, m.receipt, m.attempt, m.max, m.deliver, m.enqueued, deadline}) do
      out[#out + 1] = v
    end
  end
end
out[1] = nextDue()
return out
