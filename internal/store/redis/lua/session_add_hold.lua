-- Adds a hold (of any kind) to a live session's set, as a pending binding:
-- keepalives check it but do not renew it until session_confirm_hold.lua
-- confirms it; the set's version hv goes up (session_holds_kept.lua). A
-- binding never confirmed (its confirmation's reply was lost: the caller
-- was told its outcome is unknown, and releases it by its token) ends at
-- the grant's deadline for everyone else (session_vouch.lua), and is
-- reported lost by the next heartbeat that looks at the holds.
-- Arguments: sessionAddHoldArgs (sessions.go); keys: the session's
-- (keys.go, sessionKeyParts).
-- Returns {OK, the session's deadline}; {SESSION_GONE} it is not live;
-- {FULL} it has as many holds as it may.
local cur = redis.call('HMGET', kSession, 'dl', 'closing')
local deadline = tonumber(cur[1] or '0')
if deadline <= now or cur[2] then return {SESSION_GONE} end
if max > 0 and redis.call('HLEN', kHolds) + redis.call('HLEN', kLost) >= max then return {FULL} end
redis.call('HSET', kHolds, field, entry)
expireAt(kHolds, stepUp(deadline + grace))
redis.call('HINCRBY', kSession, 'hv', 1)
return {OK, deadline}
