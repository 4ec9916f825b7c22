-- Hands out ready messages, the highest priority first, then in the order
-- they became due, each with a fresh receipt.
-- Arguments: queueClaimArgs (queue.go).
-- Returns {next due µs, then per message: ID, encoded message, receipt,
-- attempt, max attempts, deliver, enqueue time, claim deadline, priority,
-- group}.
upkeep()
local deadline = now + visibility
local out = {0}
local toLast = false
local members = redis.call('ZRANGE', kReady, 0, #tokens - 1)
-- Every record is read before anything changes (see corrupt).
local refs, metas, bodies = {}, {}, {}
for i = 1, #members do
  refs[i] = readyRef(members[i])
  local id = string.sub(refs[i], 17)
  metas[i] = getMeta(id)
  if not metas[i] then corrupt('queue meta record missing') end
  bodies[i] = body(id)
end
if #members > 0 then redis.call('ZREM', kReady, unpack(members)) end
for i = 1, #refs do
  local ref = refs[i]
  local id = string.sub(ref, 17)
  local m = metas[i]
  m.attempt = m.attempt + 1
  m.receipt = id .. string.format('%08x', m.attempt) .. tokens[i]
  setMeta(id, m)
  local set = claimSet(m)
  redis.call('ZADD', set, s(deadline), ref)
  toLast = toLast or set == kLast
  for _, v in ipairs({id, bodies[i], m.receipt, m.attempt, m.max, m.deliver, m.enqueued, deadline, m.prio, m.group}) do
    out[#out + 1] = v
  end
end
if toLast then expireLast() end
out[1] = nextDue()
settle()
return out
