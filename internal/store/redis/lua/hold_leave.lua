-- Takes a ticket out of the queue and lets in whom that lets in (the
-- instance's plain tickets are granted here: hand-offs, see
-- hold_prelude.lua's wake). If the ticket is not queued and the token holds
-- a plain hold, a hand-off granted it before its request gave up: that
-- grant is answered among the hand-offs, with the ticket, and nothing
-- changes.
-- Arguments: holdLeaveArgs (holds.go).
-- Returns {OK, hand-offs...} (also for an unknown ticket); hand-offs...:
-- withHandoffs' values.
local asked = resolve() -- session-bound holders past their recorded deadline (hold_prelude.lua)
if asked then return asked end
local changed = clean()
if mayQueue() and redis.call('ZSCORE', kTickets, ticket) then
  dropTicket(ticket)
  changed = true
elseif tok ~= '' then
  local r = holder(tok)
  if r and r.dl > now and r.ses == '' then
    local lim = 0
    if kind == 'semaphore' then lim = tonumber(meta('lim') or '0') end
    for _, v in ipairs({ticket, tok, r.fence, r.dl, liveCount(), lim}) do handed[#handed + 1] = v end
  end
end
if changed then wake(me, timeSeen) end
keep()
return withHandoffs({OK})
