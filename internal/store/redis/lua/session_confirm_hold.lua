-- Confirms a pending binding (session_add_hold.lua): from now on the
-- session's keepalives renew the hold, before its keys' horizon (the
-- session's hk is lowered to it) and its max hold (nl lowered to it); the
-- set's version hv goes up.
-- Arguments: sessionConfirmHoldArgs (sessions.go); keys: the session's
-- (keys.go, sessionKeyParts).
-- Returns {OK, the session's deadline}; {SESSION_GONE} the session is not
-- live; {NO} the entry is no longer the binding's (lost, released or
-- expired meanwhile).
local cur = redis.call('HMGET', kSession, 'dl', 'closing')
local deadline = tonumber(cur[1] or '0')
if deadline <= now or cur[2] then return {SESSION_GONE} end
local cur = redis.call('HGET', kHolds, field)
if not cur or string.sub(cur, 1, #tok + 1) ~= tok .. ' ' then return {NO} end
redis.call('HSET', kHolds, field, entry)
local hs = redis.call('HMGET', kSession, 'hk', 'nl')
local hk, nl = tonumber(hs[1] or '0'), tonumber(hs[2] or '0')
if hk == 0 or horizon < hk then redis.call('HSET', kSession, 'hk', s(horizon)) end
if holdUntil > 0 and (nl == 0 or holdUntil < nl) then redis.call('HSET', kSession, 'nl', s(holdUntil)) end
redis.call('HINCRBY', kSession, 'hv', 1)
redis.call('SPUBLISH', channel, '')
return {OK, deadline}
