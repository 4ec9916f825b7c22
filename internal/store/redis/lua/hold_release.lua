-- Deletes a hold if the token holds it live (an election's: a resignation,
-- logged), and lets in whom that lets in: the releasing instance's plain
-- tickets are granted here (hand-offs, see hold_prelude.lua's wake), the
-- others woken.
-- Arguments: holdReleaseArgs (holds.go).
-- Returns {OK, µs it was held, hand-offs...} released; {NO, hand-offs...}
-- not held; {SESSION_BOUND, session ID} bound to a session. hand-offs...:
-- withHandoffs' values.
-- Session-bound holders past their recorded deadline (hold_prelude.lua's
-- resolve) matter only to whom this lets in and to a session-bound holder:
-- the release of a plain lease with nobody queued needs no word from any
-- session.
-- A bound release's own fact (holds.go releaseHold) is the session's word
-- when the hold left its set: live then, it is live until this release,
-- however late the release comes.
if bound and facts[tok] and facts[tok].live and facts[tok].dl <= now then facts[tok].dl = now + 1 end
local r = holder(tok)
if kind == 'election' or mayQueue() or not r or r.ses ~= '' then
  local asked = resolve(tok)
  if asked then return asked end
  if settled[tok] then r = holder(tok) end
end
local left = false
if ticket ~= '' and mayQueue() and redis.call('ZSCORE', kTickets, ticket) then
  dropTicket(ticket)
  left = true
end
if not r or r.dl <= now then
  if clean() or left then wake(me, timeSeen) end
  keep()
  return withHandoffs({NO})
end
-- (A ticket that left here lets in whom it held back when the later call
-- that deletes the hold wakes.)
if r.ses ~= '' and not bound then return {SESSION_BOUND, r.ses} end
removeHolder(tok, r)
-- With nobody queued there is nobody to let in, and expired holders wait
-- for the next acquisition's clean-up (their lock-delay is the same then);
-- an election syncs its log every time.
if kind == 'election' or mayQueue() then
  clean()
  wake(me, timeSeen)
end
keep()
return withHandoffs({OK, now - r.acq})
