-- Notes that a heartbeat renewed every confirmed hold of the session to
-- keys that last until horizon (session_refresh.lua's hk) and that the
-- next max hold or pending binding to look at is at nl (0: none), unless
-- the set changed since the heartbeat read it (its version hv is not seen:
-- a hold bound meanwhile has its own horizon, and the next heartbeat looks
-- again).
-- Arguments: sessionHoldsKeptArgs (sessions.go); keys: the session's hash.
-- Returns OK noted, NO not.
local cur = redis.call('HMGET', kSession, 'dl', 'hv')
if not cur[1] or (cur[2] or '0') ~= seen then return NO end
if horizon > 0 then redis.call('HSET', kSession, 'hk', s(horizon)) end
if nl > 0 then redis.call('HSET', kSession, 'nl', s(nl)) else redis.call('HDEL', kSession, 'nl') end
return OK
