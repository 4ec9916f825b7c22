-- The session hold of every kind (refreshHold, dropHold in holds.go): renews, checks or
-- drops a session's hold by its token, from the session's keepalive, check
-- or close. A drop wakes whom it lets in (and is an election's resignation).
-- A renew or check that finds the hold expired removes it as a drop does.
-- Arguments: holdSessionArgs (holds.go).
-- Returns {OK} if the session holds it live, else {NO, now µs} (the time
-- it was found not live: the session's caller tells a max hold reached from
-- a hold gone by it, as the session's own time may be older); for "drop",
-- {OK, µs it was held} if it held it live, else {NO}.
local r = holder(tok)
if mode == 'drop' then
  if not r then return {NO} end
  removeHolder(tok, r)
  local live = r.dl > now
  -- As hold_release.lua: nobody queued, nobody to let in.
  if kind == 'election' or mayQueue() then
    clean()
    wake()
  end
  keep()
  if not live then return {NO} end
  return {OK, now - r.acq}
end
if not r then return {NO, now} end
if r.dl <= now then
  -- It ended by its session: gone now (its lock-delay, an election's "no
  -- leader"), letting the next in.
  removeHolder(tok, r)
  if kind == 'election' or mayQueue() then
    clean()
    wake()
  end
  keep()
  return {NO, now}
end
if mode == 'renew' then
  local deadline = sessionDeadline
  if r.hold > 0 and r.hold < deadline then deadline = r.hold end
  if deadline > r.dl then
    local before = holderUntil(r.dl, r.delay)
    setDeadline(tok, r, deadline)
    -- Its keys last until holderUntil(r.dl, r.delay) already (holderNeed).
    if holderUntil(deadline, r.delay) > before then keep() else want = {} end
  end
end
return {OK}
