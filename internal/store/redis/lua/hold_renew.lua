-- Extends a plain lease held by a token.
-- Arguments: holdRenewArgs (holds.go).
-- Returns {OK, deadline, fence, now}; {NO} not held; {SESSION_BOUND} bound
-- to a session (and held: a session-bound holder past its recorded
-- deadline lives by its session, which resolve asks first, as every hold
-- script's reader of such a holder does).
local r = holder(tok)
if r and r.ses ~= '' and r.dl <= now then
  local asked = resolve(tok)
  if asked then return asked end
  r = holder(tok)
end
if not r or r.dl <= now then return {NO} end
if r.ses ~= '' then return {SESSION_BOUND} end
local deadline = now + ttl
if r.hold > 0 and r.hold < deadline then deadline = r.hold end
setDeadline(tok, r, deadline)
keep()
return {OK, deadline, r.fence, now}
