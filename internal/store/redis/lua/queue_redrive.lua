-- Moves dead letters, oldest first, back to ready with their attempts reset;
-- wakes the queue if it moved any.
-- KEYS: see queue_prelude.lua  ARGV[3]: at most this many  ARGV[4]: wake-up channel
-- Returns how many it moved.
upkeep()
local refs = redis.call('LPOP', KEYS[4], tonumber(ARGV[3]))
if not refs then return 0 end
for i = 1, #refs do
  local id = string.sub(refs[i], 17)
  local m = getMeta(id)
  m.attempt = 0
  setMeta(id, m)
  redis.call('RPUSH', KEYS[1], refs[i])
end
redis.call('SPUBLISH', ARGV[4], '')
return #refs
