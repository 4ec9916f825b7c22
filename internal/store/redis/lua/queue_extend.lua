-- Moves a live claim's deadline to now + visibility.
-- KEYS: see queue_prelude.lua  ARGV[4]: receipt  ARGV[5]: visibility µs
-- Returns {OK, the new deadline}; {NO} the claim is not live.
upkeep()
local id, _, ref, set = claimed(ARGV[4])
if not id then
  settle()
  return {NO}
end
local deadline = now + tonumber(ARGV[5])
redis.call('ZADD', set, s(deadline), ref)
if set == KEYS[3] then expireLast() end
settle()
return {OK, deadline}
