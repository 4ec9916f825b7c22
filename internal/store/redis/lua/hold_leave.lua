-- Takes a ticket out of the queue and lets in whom that lets in (the
-- instance's plain tickets are granted here: hand-offs, see
-- hold_prelude.lua's wake). If the ticket is not queued and the token holds
-- a plain hold, a hand-off granted it before its request gave up: that
-- grant is answered among the hand-offs, with the ticket, and nothing
-- changes.
-- KEYS: hold_prelude.lua's
-- ARGV[5]: the ticket  ARGV[6]: the waiting request's token ("": none)
-- ARGV[7]: the instance ("": none, nothing is handed off)
-- ARGV[8]: the highest server time µs the instance has seen (fenceFloor)
-- Returns {OK, hand-offs...} (also for an unknown ticket); hand-offs...:
-- withHandoffs' values.
local ticket, tok, me, timeSeen = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8])
local changed = clean()
if mayQueue() and redis.call('ZSCORE', KEYS[5], ticket) then
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
