-- Describes a lock's live holder.
-- KEYS[1]: the lock
-- Returns {OK, owner, fence, session, deadline, acquired, now} held; {NO}
-- free.
local cur = redis.call('HMGET', KEYS[1], 'own', 'fen', 'ses', 'dl', 'acq')
if not cur[4] or tonumber(cur[4]) <= now then return {NO} end
return {OK, cur[1], tonumber(cur[2]), cur[3], tonumber(cur[4]), tonumber(cur[5]), now}
