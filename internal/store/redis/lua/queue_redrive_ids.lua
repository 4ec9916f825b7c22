-- Moves exactly those of the given messages that are dead letters (dead,
-- or a claim that ended on its last attempt and that upkeep left) back to
-- ready, as queue_redrive.lua moves each; skips the others (unknown,
-- forgotten, live, or already moved by this call); wakes the queue if it
-- moved any.
-- Arguments: queueRedriveIDsArgs (queue.go).
-- Returns how many it moved.
upkeep()
local n = 0
local forgotten = now - deadTTL
for _, id in ipairs(ids) do
  local dm, db = deadRecord(id)
  if dm then
    local ref = dm.seq .. id
    local died = redis.call('ZSCORE', kDead, ref)
    if died and tonumber(died) > forgotten then
      redis.call('ZREM', kDead, ref)
      forgetDead(id)
      revive(id, dm, db)
      n = n + 1
    end
  else
    local m = getMeta(id)
    if m then
      local ref = m.seq .. id
      local ended = redis.call('ZSCORE', kLast, ref)
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
