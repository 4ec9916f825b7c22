-- Deletes a hold if the token holds it live (an election's: a resignation,
-- logged), and wakes whom that lets in (a lock's LockTopic too).
-- KEYS: hold_prelude.lua's
-- ARGV[5]: token
-- ARGV[6]: "1" to delete a session-bound hold too (its session's entry is
--          already gone); otherwise such a hold is left for the caller to
--          take out of its session first.
-- Returns {OK, µs it was held} released; {NO} not held; {SESSION_BOUND,
-- session ID} bound to a session.
local tok = ARGV[5]
local r = holder(tok)
if not r or r.dl <= now then
  if clean() then wake() end
  keep()
  return {NO}
end
if r.ses ~= '' and ARGV[6] ~= '1' then return {SESSION_BOUND, r.ses} end
removeHolder(tok, r)
if kind == 'lock' then redis.call('SPUBLISH', base .. ':ev', '') end
-- With nobody queued there is nobody to let in, and expired holders wait
-- for the next acquisition's clean-up (their lock-delay is the same then);
-- an election syncs its log every time.
if kind == 'election' or mayQueue() then
  clean()
  wake()
end
keep()
return {OK, now - r.acq}
