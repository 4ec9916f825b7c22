-- Keeps a namespace's index of live sessions, for its cap.
-- KEYS[1]: the index (sorted set: score = a time µs the session is live
--          no later than: its deadline when admitted, then, as refreshes
--          touch it, up to 3 ttl past its deadline: session_refresh.lua)
-- ARGV[3]: "admit", "touch" or "remove"
-- admit: ARGV[4] the session ID, ARGV[5] its ttl µs, ARGV[6] the cap (0:
-- none); touch: ARGV[4] the session ID, ARGV[5] its new score µs; remove:
-- ARGV[4...] session IDs
-- Returns OK, or, if "admit" found the namespace full, {NO, id, ...}: the
-- IDs of up to 64 sessions with the lowest scores, which may have ended
-- since their last touch (the caller checks them, removes the ended ones
-- and admits again).
-- Sessions whose score has passed leave the index when the next one is
-- admitted. The index itself ends with its latest score, so that the index
-- of a namespace that has gone idle does not stay forever.
-- keepUntilLast makes the index expire with its latest score.
local function keepUntilLast(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then expireAt(key, tonumber(last[2])) end
end
if ARGV[3] == 'remove' then
  for i = 4, #ARGV do redis.call('ZREM', KEYS[1], ARGV[i]) end
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
if max > 0 and redis.call('ZCARD', KEYS[1]) >= max then
  local out = {NO}
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, 63)) do out[#out + 1] = id end
  return out
end
redis.call('ZADD', KEYS[1], s(now + tonumber(ARGV[5])), ARGV[4])
keepUntilLast(KEYS[1])
return OK
