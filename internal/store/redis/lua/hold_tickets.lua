-- Renews the leases of tickets still waiting; drops lapsed tickets and
-- wakes whom that lets in.
-- KEYS: hold_prelude.lua's
-- ARGV[5]: lease µs  ARGV[6], ARGV[7], ...: tickets (at most 1000)
-- Returns the tickets that are not in the queue any more.
local gone = {}
local changed = clean()
local lease = s(now + tonumber(ARGV[5]))
for i = 6, #ARGV do
  local t = ARGV[i]
  if ticketSeq(t) then
    redis.call('ZADD', KEYS[6], lease, t)
  else
    if redis.call('ZSCORE', KEYS[5], t) then
      dropTicket(t)
      changed = true
    end
    gone[#gone + 1] = t
  end
end
if changed then wake() end
if #ARGV >= 6 or changed then keep() end
return gone
