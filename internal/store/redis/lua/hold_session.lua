-- The session hold of every kind (holdKind in holds.go): renews, checks or
-- drops a session's hold by its token, from the session's keepalive, check
-- or close. A drop wakes whom it lets in (and is an election's resignation).
-- KEYS: hold_prelude.lua's
-- ARGV[5]: the session's token for it  ARGV[6]: the session's deadline µs
-- ARGV[7]: "renew" (extend the deadline to min(session deadline, max hold);
--          never shorten it, so that renewals applied out of order are
--          harmless), "check", or "drop" (delete it if it is still the
--          session's; an expired one leaves its lock-delay)
-- A renew or check that finds the hold expired removes it as a drop does.
-- Returns {OK} if the session holds it live, else {NO, now µs} (the time
-- it was found not live: the session's caller tells a max hold reached from
-- a hold gone by it, as the session's own time may be older); for "drop",
-- {OK, µs it was held} if it held it live, else {NO}.
local tok = ARGV[5]
local r = holder(tok)
if ARGV[7] == 'drop' then
  if not r then return {NO} end
  removeHolder(tok, r)
  local live = r.dl > now
  if live and kind == 'lock' then redis.call('SPUBLISH', base .. ':ev', '') end
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
if ARGV[7] == 'renew' then
  local deadline = tonumber(ARGV[6])
  if r.hold > 0 and r.hold < deadline then deadline = r.hold end
  if deadline > r.dl then
    local before = holderUntil(r.dl)
    setDeadline(tok, r, deadline)
    -- Its keys last until holderUntil(r.dl) already (holderNeed).
    if holderUntil(deadline) > before then keep() else want = {} end
  end
end
return {OK}
