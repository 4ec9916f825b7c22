-- Counts a queue's messages by state, by their scores: exact whatever
-- upkeep has done so far.
-- KEYS: see queue_prelude.lua
-- Returns {ready, delayed, in flight, dead}.
upkeep()
local t, after, kept = s(now), '(' .. s(now), '(' .. s(now - deadTTL)
local r = {
  redis.call('ZCOUNT', KEYS[1], '-inf', t) + redis.call('ZCOUNT', KEYS[2], '-inf', t),
  redis.call('ZCOUNT', KEYS[1], after, '+inf'),
  redis.call('ZCOUNT', KEYS[2], after, '+inf') + redis.call('ZCOUNT', KEYS[3], after, '+inf'),
  redis.call('ZCOUNT', KEYS[4], kept, '+inf') + redis.call('ZCOUNT', KEYS[3], kept, t),
}
settle()
return r
