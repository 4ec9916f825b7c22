-- Counts a queue's messages by state, after upkeep.
-- KEYS: see queue_prelude.lua
-- Returns {ready, delayed, in flight, dead}.
upkeep()
return {redis.call('LLEN', KEYS[1]), redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), redis.call('LLEN', KEYS[4])}
