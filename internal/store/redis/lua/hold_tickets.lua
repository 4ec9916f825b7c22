-- Renews the leases of tickets still waiting; drops lapsed tickets and
-- wakes whom that lets in.
-- Arguments: holdTicketsArgs (holds.go).
-- Returns the tickets that are not in the queue any more.
local asked = resolve() -- session-bound holders past their recorded deadline (hold_prelude.lua)
if asked then return asked end
local gone = {}
local changed = clean()
local leaseEnd = s(now + lease)
local renewed = false
for _, t in ipairs(tickets) do
  if ticketSeq(t) then
    redis.call('ZADD', kTicketLeases, leaseEnd, t)
    renewed = true
  else
    if mayQueue() and redis.call('ZSCORE', kTickets, t) then
      dropTicket(t)
      changed = true
    end
    gone[#gone + 1] = t
  end
end
-- Which renewed tickets are exclusive is not read: the exclusive tickets'
-- key is kept as long as any (GT never shortens it).
if renewed then ticketNeed(now + lease, true) end
if changed then wake() end
keep()
return gone
