-- Hands out ready messages, the highest priority first, then in the order
-- they became due, each with a fresh receipt.
-- Arguments: queueClaimArgs (queue.go).
-- Returns {next due µs, the setting that held ready messages back (0
-- none, 1 paused, 2 max in flight, 3 claim rate), then per message: ID,
-- encoded message, receipt,
-- attempt, max attempts, deliver, enqueue time, claim deadline, priority,
-- group}.
upkeep()
local deadline = now + visibility
local out = {0, 0}
local toLast = false
-- The settings bound how many: none while paused, no more than the free
-- slots, then no more than the rate's tokens.
local c = conf()
if reserved then c.max, c.rl = 0, 0 end -- the partitioned queue's reservations counted the caps
local want, held = capSlots(c, #tokens, live)
local slotNext = 0
if held == 2 then
  -- A slot frees at the first claim's deadline, a claim on its last
  -- attempt too (which nextDue leaves out: it makes nothing ready).
  local _, d = firstIn(kLast, '(' .. s(now), '+inf')
  if d then slotNext = d - now end
end
local members = {}
if want > 0 then members = redis.call('ZRANGE', kReady, 0, want - 1) end
if held > 0 and #members == want and redis.call('ZCARD', kReady) <= want then held, slotNext = 0, 0 end -- none was ready beyond
local took, rateNext = capRate(c, #members)
if took < #members then held = 3 end
for i = #members, took + 1, -1 do members[i] = nil end
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
out[1], out[2] = nextDue(), held
for _, n in ipairs({rateNext, slotNext}) do
  if n > 0 and (out[1] == 0 or n < out[1]) then out[1] = n end
end
settle()
return out
