-- Moves a live claim's deadline to now + visibility.
-- KEYS: see queue_prelude.lua  ARGV[3]: receipt  ARGV[4]: visibility µs
-- Returns the new deadline; 0 the claim is not live.
upkeep()
local id, m, ref = claimed(ARGV[3])
if not id then return 0 end
local deadline = now + tonumber(ARGV[4])
redis.call('ZADD', KEYS[3], s(deadline), ref)
return deadline
