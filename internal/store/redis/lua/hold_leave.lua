-- Takes a ticket out of the queue and wakes whom that lets in.
-- KEYS: hold_prelude.lua's
-- ARGV[5]: the ticket
-- Returns OK (also for an unknown ticket).
if mayQueue() and redis.call('ZSCORE', KEYS[5], ARGV[5]) then
  dropTicket(ARGV[5])
  clean()
  wake()
elseif clean() then
  wake()
end
keep()
return OK
