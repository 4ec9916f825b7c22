-- Moves exactly those of the given messages that are dead letters (dead,
-- or a claim that ended on its last attempt and that upkeep left) back to
-- ready, as queue_redrive.lua moves each; skips the others (unknown,
-- forgotten, live, or already moved by this call); wakes the queue if it
-- moved any.
-- KEYS: see queue_prelude.lua  ARGV[5..]: message IDs (bounded work: at
-- most 10 × queue.max_claim_messages of them)
-- Returns how many it moved.
upkeep()
local n = 0
local forgotten = now - deadTTL
for i = 5, #ARGV do
  local id = ARGV[i]
  local dm, db = deadRecord(id)
  if dm then
    local ref = dm.seq .. id
    local died = redis.call('ZSCORE', KEYS[4], ref)
    if died and tonumber(died) > forgotten then
      redis.call('ZREM', KEYS[4], ref)
      redis.call('HDEL', KEYS[7], id)
      revive(id, dm, db)
      n = n + 1
    end
  else
    local m = getMeta(id)
    if m then
      local ref = m.seq .. id
      local ended = redis.call('ZSCORE', KEYS[3], ref)
      if ended and tonumber(ended) <= now and tonumber(ended) > forgotten then
        local b = body(id)
        endLast(ref, m) -- the group moves on first; revive wakes the queue anyway
        revive(id, m, b)
        n = n + 1
      end
    end
  end
end
if n > 0 then redis.call('SPUBLISH', wakeChannel, '') end
settle()
return n
