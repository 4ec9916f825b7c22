-- Hands out ready messages, the one due first first, each with a fresh
-- receipt.
-- KEYS: see queue_prelude.lua
-- ARGV[4]: visibility timeout µs  ARGV[5], ...: one claim token per message
-- wanted (at most queue.max_claim_messages: bounded work)
-- Returns {next due µs, then per message: ID, encoded message, receipt,
-- attempt, max attempts, deliver, enqueue time, claim deadline}.
upkeep()
local deadline = now + tonumber(ARGV[4])
local out = {0}
local toLast = false
local refs = readyRefs(#ARGV - 4)
-- Every record is read before anything changes (see corrupt).
local metas, bodies = {}, {}
for i = 1, #refs do
  local id = string.sub(refs[i][1], 17)
  metas[i] = getMeta(id)
  if not metas[i] then corrupt('queue meta record missing') end
  bodies[i] = body(id)
end
for i = 1, #refs do
  local ref, from = refs[i][1], refs[i][2]
  redis.call('ZREM', from, ref)
  local id = string.sub(ref, 17)
  local m = metas[i]
  m.attempt = m.attempt + 1
  m.receipt = id .. string.format('%08x', m.attempt) .. ARGV[4 + i]
  setMeta(id, m)
  local set = claimSet(m)
  redis.call('ZADD', set, s(deadline), ref)
  toLast = toLast or set == KEYS[3]
  for _, v in ipairs({id, bodies[i], m.receipt, m.attempt, m.max, m.deliver, m.enqueued, deadline}) do
    out[#out + 1] = v
  end
end
if toLast then expireLast() end
out[1] = nextDue()
settle()
return out
