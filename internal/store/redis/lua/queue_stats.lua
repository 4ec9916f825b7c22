-- Counts a queue's messages by state, by their scores: exact whatever
-- upkeep has done so far. A message waiting behind its group's head counts
-- as delayed.
-- KEYS: see queue_prelude.lua
-- Returns {ready, delayed, in flight, dead}.
local t, after, kept = s(now), '(' .. s(now), '(' .. s(now - deadTTL)
return {
  redis.call('ZCARD', KEYS[11]) + redis.call('ZCOUNT', KEYS[1], '-inf', t) + redis.call('ZCOUNT', KEYS[2], '-inf', t),
  redis.call('ZCOUNT', KEYS[1], after, '+inf') + redis.call('ZCARD', KEYS[13]),
  redis.call('ZCOUNT', KEYS[2], after, '+inf') + redis.call('ZCOUNT', KEYS[3], after, '+inf'),
  redis.call('ZCOUNT', KEYS[4], kept, '+inf') + redis.call('ZCOUNT', KEYS[3], kept, t),
}
