-- Takes locks out of a session's set, each only if its entry still has the
-- given token (a lock the session lost, or is releasing).
-- KEYS[1]: the lock set
-- ARGV[3], ARGV[4], ...: pairs of lock name and token
-- Returns the names of the entries it removed: a lock that left the set
-- otherwise (released by its token meanwhile) is not lost.
local removed = {}
for i = 3, #ARGV, 2 do
  local entry = redis.call('HGET', KEYS[1], ARGV[i])
  if entry and string.sub(entry, 1, #ARGV[i + 1]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    removed[#removed + 1] = ARGV[i]
  end
end
return removed
