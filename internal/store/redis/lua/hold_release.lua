-- Deletes a hold if the token holds it live (an election's: a resignation,
-- logged), and lets in whom that lets in: the releasing instance's plain
-- tickets are granted here (hand-offs, see hold_prelude.lua's wake), the
-- others woken (a lock's LockTopic too).
-- KEYS: hold_prelude.lua's
-- ARGV[5]: token
-- ARGV[6]: "1" to delete a session-bound hold too (its session's entry is
--          already gone); otherwise such a hold is left for the caller to
--          take out of its session first.
-- ARGV[7]: the releasing instance ("": none, nothing is handed off)
-- ARGV[8]: the highest server time µs the instance has seen (fenceFloor)
-- ARGV[9]: a ticket to take out of the queue first ("": none): the
--          abandoned request's, so that no release hands it the hold later
-- Returns {OK, µs it was held, hand-offs...} released; {NO, hand-offs...}
-- not held; {SESSION_BOUND, session ID} bound to a session. hand-offs...:
-- withHandoffs' values.
local tok, me, timeSeen, ticket = ARGV[5], ARGV[7], tonumber(ARGV[8]), ARGV[9]
local left = false
if ticket ~= '' and mayQueue() and redis.call('ZSCORE', KEYS[5], ticket) then
  dropTicket(ticket)
  left = true
end
local r = holder(tok)
if not r or r.dl <= now then
  if clean() or left then wake(me, timeSeen) end
  keep()
  return withHandoffs({NO})
end
-- (A ticket that left here lets in whom it held back when the later call
-- that deletes the hold wakes.)
if r.ses ~= '' and ARGV[6] ~= '1' then return {SESSION_BOUND, r.ses} end
removeHolder(tok, r)
if kind == 'lock' then redis.call('SPUBLISH', base .. ':ev', '') end
-- With nobody queued there is nobody to let in, and expired holders wait
-- for the next acquisition's clean-up (their lock-delay is the same then);
-- an election syncs its log every time.
if kind == 'election' or mayQueue() then
  clean()
  wake(me, timeSeen)
end
keep()
return withHandoffs({OK, now - r.acq})
