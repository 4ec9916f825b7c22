-- A plain exclusive lock's request (no session, not shared) while the
-- lock is free or held by its solo holder and nothing else
-- (hold_prelude.lua's solo): the uncontended case, in a script that reads
-- nothing but the lock's meta. Anything else (holders in the holder keys,
-- a queue, a lock-delay, a request that would queue) is answered SLOW, and
-- coordd runs hold_acquire.lua, which decides it all.
-- Arguments: holdAcquireSoloArgs (holds.go).
-- Returns hold_acquire.lua's replies {OK, fence, deadline, now, 1, 0}
-- granted (also to a request that waits and comes back with the token a
-- hand-off granted) and {NO, holder owner, holder deadline, now, retry at,
-- 0, 1, 0, '', holder's max hold} held by another; or {SLOW}.
local m = redis.call('HMGET', kMeta, 'f', 'seq', 'du', 'x', 'ht', 'hr')
local f, seq, du, x, ht, hr = m[1], m[2], m[3], m[4], m[5], m[6]
if seq or x or (du and tonumber(du) > now) then return {SLOW} end
if ht then
  local r = dec(hr)
  if r.dl > now then
    if ht == tok and ticket ~= '' then return {OK, r.fence, r.dl, now, 1, 0} end
    if ticket ~= '' then return {SLOW} end -- it queues
    return {NO, r.own, r.dl, now, r.dl, 0, 1, 0, '', r.hold}
  end
  -- Expired: a plain holder keeps no lock-delay, and nobody waits.
end
local hold = 0
if maxHold > 0 then hold = now + maxHold end
local deadline = now + ttl
if hold > 0 and hold < deadline then deadline = hold end
local r = {fence = nextFence(tonumber(f or '0'), fenceFloor(timeSeen)), dl = deadline, hold = hold, acq = now,
  shared = false, delay = 0, ses = '', own = owner}
redis.call('HSET', kMeta, 'f', s(r.fence), 'ht', tok, 'hr', enc(r))
-- As hold_prelude.lua's keep(): a meta that was there has a TTL, which
-- only lengthens; a new one gets its first.
local ms = s(math.ceil((soloMetaUntil(r) - now) / 1000) + 1 + slack)
if f or du then
  redis.call('PEXPIRE', kMeta, ms, 'GT')
else
  redis.call('PEXPIRE', kMeta, ms)
end
return {OK, r.fence, deadline, now, 1, 0}
