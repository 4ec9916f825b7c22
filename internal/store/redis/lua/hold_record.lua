-- What every hold script shares with the solo scripts (hold_*_solo.lua),
-- after lua/prelude.lua: holder records, the fence rule, and the lifetime
-- of a lock's meta hash while it keeps the lock's solo holder
-- (hold_prelude.lua's solo). Binds nothing but idleTTL and kMeta.

-- A holder's record: "fence deadline hold acquired shared delay sesLen
-- session owner" (µs; hold 0: no max hold; shared 0/1; the session ID's
-- length, then the ID and the owner label, which may contain anything).
local function enc(r)
  return s(r.fence) .. ' ' .. s(r.dl) .. ' ' .. s(r.hold) .. ' ' .. s(r.acq) .. ' ' ..
    (r.shared and '1' or '0') .. ' ' .. s(r.delay) .. ' ' .. s(#r.ses) .. ' ' .. r.ses .. r.own
end
local function dec(rec)
  local f, dl, hold, acq, sh, delay, n, rest =
    string.match(rec, '^(%d+) (%d+) (%d+) (%d+) ([01]) (%d+) (%d+) (.*)$')
  if not f then corrupt('holder record') end
  n = tonumber(n)
  return {fence = tonumber(f), dl = tonumber(dl), hold = tonumber(hold), acq = tonumber(acq),
    shared = sh == '1', delay = tonumber(delay), ses = string.sub(rest, 1, n), own = string.sub(rest, n + 1)}
end

-- fenceFloor: a grant's fence is at least the server time, or, when the
-- clock is behind the highest time this coordd has seen (timeSeen, an ARGV:
-- a failover promoted a node whose clock is behind the old master's),
-- timeSeen + 1, so that fences stay above those the old master issued and
-- lost.
local function fenceFloor(timeSeen)
  if timeSeen > now then return timeSeen + 1 end
  return now
end
-- nextFence is the fence rule: max(counter + 1, floor). The counter (meta's
-- f) lasts idleTTL from the grant: a later grant finds it, or, once it has
-- ended, a floor above every fence it held as long as the clock has not
-- stepped back by more than idleTTL (a fence is at most the time it was
-- issued at, but for the few a script hands off in one microsecond).
local function nextFence(counter, floor)
  if counter + 1 > floor then return counter + 1 end
  return floor
end

-- soloMetaUntil: how long a lock's meta must last while it keeps solo
-- holder r: the fence counter idleTTL after its grant, the holder until
-- its deadline (and lock-delay) rounded up a step (stepUp, so that a
-- renewal within the step needs no new TTL).
local function soloMetaUntil(r)
  return math.max(r.acq + idleTTL, stepUp(r.dl + r.delay))
end
-- soloLeft: solo holder r is gone, and meta keeps nothing else that needs
-- it beyond the fence counter: a lease longer than idleTTL made meta last
-- longer than the counter needs, which it now ends with.
local function soloLeft(r)
  if stepUp(r.dl + r.delay) > r.acq + idleTTL then expireAt(kMeta, r.acq + idleTTL) end
end
