-- Keeps a namespace's index of live sessions, for its cap.
-- KEYS[1]: the index (sorted set: score = the session's deadline µs)
-- ARGV[3]: "admit", "touch" or "remove"  ARGV[4]: session ID
-- ARGV[5]: admit: the session's ttl µs; touch: its new deadline µs
-- ARGV[6]: the cap (admit; 0: none)
-- Returns OK, or NO if "admit" found the namespace full.
-- Sessions whose deadline has passed leave the index when the next one is
-- admitted (they are at most the cap, plus those admitted since). The
-- index itself ends with its last session's deadline, so that the index of
-- a namespace that has gone idle does not stay forever.
-- keepUntilLast makes the index expire with its latest deadline.
local function keepUntilLast(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then expireAt(key, tonumber(last[2])) end
end
if ARGV[3] == 'remove' then
  redis.call('ZREM', KEYS[1], ARGV[4])
  return OK
end
if ARGV[3] == 'touch' then
  -- GT: never moves a session back; adds one that an admit's clean-up
  -- dropped while a touch was lost.
  redis.call('ZADD', KEYS[1], 'GT', ARGV[5], ARGV[4])
  keepUntilLast(KEYS[1])
  return OK
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', s(now))
local max = tonumber(ARGV[6])
if max > 0 and redis.call('ZCARD', KEYS[1]) >= max then return NO end
redis.call('ZADD', KEYS[1], s(now + tonumber(ARGV[5])), ARGV[4])
keepUntilLast(KEYS[1])
return OK
