-- Extends a plain lease held by a token.
-- KEYS: hold_prelude.lua's
-- ARGV[5]: token  ARGV[6]: ttl µs
-- Returns {OK, deadline, fence, now}; {NO} not held; {SESSION_BOUND} bound
-- to a session.
local tok = ARGV[5]
local r = holder(tok)
if not r or r.dl <= now then return {NO} end
if r.ses ~= '' then return {SESSION_BOUND} end
local deadline = now + tonumber(ARGV[6])
if r.hold > 0 and r.hold < deadline then deadline = r.hold end
setDeadline(tok, r, deadline)
keep()
return {OK, deadline, r.fence, now}
