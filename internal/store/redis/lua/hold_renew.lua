-- Extends a plain lease held by a token.
-- Arguments: holdRenewArgs (holds.go).
-- Returns {OK, deadline, fence, now}; {NO} not held; {SESSION_BOUND} bound
-- to a session.
local r = holder(tok)
if not r or r.dl <= now then return {NO} end
if r.ses ~= '' then return {SESSION_BOUND} end
local deadline = now + ttl
if r.hold > 0 and r.hold < deadline then deadline = r.hold end
setDeadline(tok, r, deadline)
keep()
return {OK, deadline, r.fence, now}
