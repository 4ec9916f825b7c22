-- Describes a lock's live holder.
-- KEYS[1]: the lock
-- Returns {1, owner, fence, session, deadline, acquired, now} held; {0} free.
local cur = redis.call('HMGET', KEYS[1], 'own', 'fen', 'ses', 'dl', 'acq')
if not cur[4] or tonumber(cur[4]) <= now then return {0} end
return {1, cur[1], tonumber(cur[2]), cur[3], tonumber(cur[4]), tonumber(cur[5]), now}
