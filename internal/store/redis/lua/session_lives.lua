-- Reads a session's deadline for the holds it has, which live until it
-- (hold_prelude.lua's resolve): a session being closed still has them
-- until the close drops them. Changes nothing.
-- Keys: the session's hash (keys.go, sessionKeyParts).
-- Returns {OK, deadline} while it lives, {NO, deadline} once it has ended
-- (its last deadline; 0 if it is unknown).
local dl = tonumber(redis.call('HGET', kSession, 'dl') or '0')
if dl <= now then return {NO, dl} end
return {OK, dl}
