-- The session hold of every kind (refreshHold, dropHold, expireHold in
-- holds.go): renews, checks or drops a session's hold by its token, from
-- the session's keepalive, check or close. The session is the caller, so a
-- confirmed hold whose recorded deadline has passed (hold_prelude.lua's
-- resolve) lives by it, unless its max hold has come. Modes:
-- "renew" (the session lives until sessionDeadline: the hold gets that
-- deadline, capped by its max hold, and its keys keepFor beyond it; never
-- shortened, so renewals applied out of order are harmless); "check" (a
-- pending binding, never renewed: live only until its recorded deadline);
-- "drop" (the session closes: the hold is released, no lock-delay);
-- "expire" (the session expired at sessionDeadline: the hold ends then,
-- its lock-delay counted from then). A drop or expire wakes whom it lets in
-- (and is an election's resignation); a renew or check that finds the hold
-- ended removes it as they do.
-- Arguments: holdSessionArgs (holds.go).
-- Returns {OK} if the session holds it live, else {NO, now µs} (the time
-- it was found not live: the session's caller tells a max hold reached from
-- a hold gone by it, as the session's own time may be older); for "drop",
-- {OK, µs it was held} if it held it live, else {NO}; for "expire", {NO}.
local r = holder(tok)
local function remove()
  removeHolder(tok, r)
  -- As hold_release.lua: nobody queued, nobody to let in.
  if kind == 'election' or mayQueue() then
    clean()
    wake()
  end
  keep()
end
local maxHoldCame = r and r.hold > 0 and r.hold <= now
if mode == 'drop' then
  if not r then return {NO} end
  local live = r.dl > now or (r.ses ~= '' and not maxHoldCame)
  if live then r.dl = now + 1 end -- a release: no lock-delay
  remove()
  if not live then return {NO} end
  return {OK, now - r.acq}
end
if mode == 'expire' then
  if not r then return {NO} end
  -- It ended with its session, or at its max hold if that came first
  -- (removeHolder counts the lock-delay only from the former).
  r.dl = sessionDeadline
  if r.hold > 0 and r.hold < r.dl then r.dl = r.hold end
  remove()
  return {NO}
end
if not r then return {NO, now} end
if maxHoldCame or (r.dl <= now and (mode == 'check' or r.ses == '')) then
  -- It ended (its max hold, or a pending binding's deadline): gone now
  -- (its lock-delay, an election's "no leader"), letting the next in.
  remove()
  return {NO, now}
end
if mode == 'renew' then
  local deadline = sessionDeadline
  if r.hold > 0 and r.hold < deadline then deadline = r.hold end
  if deadline > r.dl then
    setDeadline(tok, r, deadline)
    keep() -- only ever lengthens its keys' TTLs
  end
end
return {OK}
