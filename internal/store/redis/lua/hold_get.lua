-- Describes a name's live holders and queue; changes nothing.
-- Arguments: holdArgs (holds.go).
-- Returns {OK, now, waiters, limit, then per live holder: fence, shared
-- (0/1), session ID ('' for none), deadline, max hold (0: none), acquired,
-- owner}; a session-bound holder's deadline is its session's as last seen
-- (the caller reads the session's own, holds.go getHolds); limit is a
-- semaphore's while it has holders or waiters, else 0. Holders are at most
-- the kind's bound (MaxHolders, Limit) plus those expired and not yet
-- cleaned up.
local asked = resolve() -- session-bound holders past their recorded deadline (hold_prelude.lua)
if asked then return asked end
local waiters = redis.call('ZCOUNT', kTicketLeases, '(' .. s(now), '+inf')
local out = {OK, now, waiters, 0}
for _, r in ipairs(holderRecords()) do
  if r.dl > now then
    out[#out + 1] = r.fence
    out[#out + 1] = r.shared and 1 or 0
    out[#out + 1] = r.ses
    out[#out + 1] = r.dl
    out[#out + 1] = r.hold
    out[#out + 1] = r.acq
    out[#out + 1] = r.own
  end
end
if kind == 'semaphore' and (#out > 4 or waiters > 0) then out[4] = tonumber(meta('lim') or '0') end
return out
