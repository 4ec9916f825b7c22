-- Takes holds out of a session's set, each only if its entry still has the
-- given token (a hold the session lost, or is releasing).
-- KEYS[1]: the session's holds
-- ARGV[3], ARGV[4], ...: pairs of field ("kind:name") and token
-- Returns the fields of the entries it removed: a hold that left the set
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
