-- Moves a live claim's deadline to now + visibility.
-- KEYS: see queue_prelude.lua  ARGV[5]: receipt  ARGV[6]: visibility µs
-- Returns {OK, the new deadline}; {NO} the claim is not live.
local id, _, ref, set = claimed(ARGV[5])
if not id then
  return {NO}
end
local deadline = now + tonumber(ARGV[6])
redis.call('ZADD', set, s(deadline), ref)
if set == KEYS[3] then expireLast() end
return {OK, deadline}
