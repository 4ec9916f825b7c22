-- Hands out ready messages, the highest priority first, then in the order
-- they became due, each with a fresh receipt.
-- KEYS: see queue_prelude.lua
-- ARGV[5]: visibility timeout µs  ARGV[6], ...: one claim token per message
-- wanted (at most queue.max_claim_messages: bounded work)
-- Returns {next due µs, then per message: ID, encoded message, receipt,
-- attempt, max attempts, deliver, enqueue time, claim deadline, priority,
-- group}.
upkeep()
local deadline = now + tonumber(ARGV[5])
local out = {0}
local toLast = false
local members = redis.call('ZRANGE', KEYS[11], 0, #ARGV - 6)
-- Every record is read before anything changes (see corrupt).
local refs, metas, bodies = {}, {}, {}
for i = 1, #members do
  refs[i] = readyRef(members[i])
  local id = string.sub(refs[i], 17)
  metas[i] = getMeta(id)
  if not metas[i] then corrupt('queue meta record missing') end
  bodies[i] = body(id)
end
if #members > 0 then redis.call('ZREM', KEYS[11], unpack(members)) end
for i = 1, #refs do
  local ref = refs[i]
  local id = string.sub(ref, 17)
  local m = metas[i]
  m.attempt = m.attempt + 1
  m.receipt = id .. string.format('%08x', m.attempt) .. ARGV[5 + i]
  setMeta(id, m)
  local set = claimSet(m)
  redis.call('ZADD', set, s(deadline), ref)
  toLast = toLast or set == KEYS[3]
  for _, v in ipairs({id, bodies[i], m.receipt, m.attempt, m.max, m.deliver, m.enqueued, deadline, m.prio, m.group}) do
    out[#out + 1] = v
  end
end
if toLast then expireLast() end
out[1] = nextDue()
settle()
return out
