-- Tells a hold whether its session-bound holder lives (hold_prelude.lua's
-- resolve asked): it does while the session is live (a close under way
-- included: the close drops it) and holds it by that token, confirmed.
-- With unbind, the holder's own release (holds.go releaseHold) takes the
-- hold out of the session's set too, if the entry has that token, in the
-- same step: the answer is then what the holder was when it left its
-- session, which nothing changes after. Otherwise it changes nothing.
-- Arguments: sessionVouchArgs (holds.go); keys: the session's hash and its
-- holds (keys.go, sessionKeyParts).
-- Returns {OK, deadline} live until the session's deadline; {NO, deadline}
-- the session expired at deadline (the holder's lock-delay counts from
-- it); {NO, 0} the session is unknown, or does not hold it by that token.
local cur = redis.call('HMGET', kSession, 'dl')
local e = redis.call('HGET', kHolds, field)
local mine = e and string.sub(e, 1, #tok + 1) == tok .. ' '
if mine and unbind then redis.call('HDEL', kHolds, field) end
if not cur[1] then return {NO, 0} end
local deadline = tonumber(cur[1])
if deadline <= now then return {NO, deadline} end
if not mine or string.sub(e, -2) == ' p' then return {NO, 0} end
return {OK, deadline}
