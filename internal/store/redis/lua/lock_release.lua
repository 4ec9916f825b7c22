-- Deletes a lock if the token holds it live, and wakes its waiters.
-- KEYS[1]: the lock
-- ARGV[3]: token  ARGV[4]: the lock's wake-up channel
-- ARGV[5]: "1" to delete a session-bound lock too (its session's entry is
--          already gone); otherwise such a lock is left for the caller to
--          take out of its session first.
-- Returns {OK, µs it was held} released; {NO} not held; {SESSION_BOUND,
-- session ID} bound to a session.
local cur = redis.call('HMGET', KEYS[1], 'tok', 'dl', 'ses', 'acq')
if cur[1] ~= ARGV[3] or tonumber(cur[2]) <= now then return {NO} end
if cur[3] ~= '' and ARGV[5] ~= '1' then return {SESSION_BOUND, cur[3]} end
redis.call('DEL', KEYS[1])
redis.call('SPUBLISH', ARGV[4], '')
return {OK, now - tonumber(cur[4])}
