-- Renews the leases of tickets still waiting; drops lapsed tickets and
-- wakes whom that lets in.
-- KEYS: hold_prelude.lua's
-- ARGV[5]: lease µs  ARGV[6], ARGV[7], ...: tickets (at most 1000)
-- Returns the tickets that are not in the queue any more.
local gone = {}
local changed = clean()
local lease = s(now + tonumber(ARGV[5]))
local renewed = false
for i = 6, #ARGV do
  local t = ARGV[i]
  if ticketSeq(t) then
    redis.call('ZADD', KEYS[6], lease, t)
    renewed = true
  else
    if mayQueue() and redis.call('ZSCORE', KEYS[5], t) then
      dropTicket(t)
      changed = true
    end
    gone[#gone + 1] = t
  end
end
-- Which renewed tickets are exclusive is not read: the exclusive tickets'
-- key is kept as long as any (GT never shortens it).
if renewed then ticketNeed(now + tonumber(ARGV[5]), true) end
if changed then wake() end
keep()
return gone
