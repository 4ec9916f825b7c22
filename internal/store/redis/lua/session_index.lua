-- Keeps a namespace's index of live sessions, for its cap.
-- Arguments: sessionIndexArgs (sessions.go).
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
if mode == 'remove' then
  for _, id in ipairs(ids) do redis.call('ZREM', kIndex, id) end
  return OK
end
if mode == 'touch' then
  -- GT: never moves a session back; adds one that an admit's clean-up
  -- dropped while a touch was lost.
  redis.call('ZADD', kIndex, 'GT', s(score), ids[1])
  keepUntilLast(kIndex)
  return OK
end
redis.call('ZREMRANGEBYSCORE', kIndex, '-inf', s(now))
if max > 0 and redis.call('ZCARD', kIndex) >= max then
  local out = {NO}
  for _, id in ipairs(redis.call('ZRANGE', kIndex, 0, 63)) do out[#out + 1] = id end
  return out
end
redis.call('ZADD', kIndex, s(now + score), ids[1])
keepUntilLast(kIndex)
return OK
