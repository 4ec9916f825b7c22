-- Starts a session, on stream epoch 1.
-- Arguments: sessionCreateArgs (sessions.go); keys: the session's
-- (keys.go, sessionKeyParts).
-- Returns {OK, deadline, now}.
local deadline = now + ttl
redis.call('DEL', kSession, kHolds, kLost)
redis.call('HSET', kSession, 'ttl', s(ttl), 'dl', s(deadline), 'ix', indexed, 'gen', '1', 'seq', '0', 'ld', s(delay))
expireAt(kSession, stepUp(deadline + grace))
return {OK, deadline, now}
