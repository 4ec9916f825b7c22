-- Takes holds out of a session's set, each only if its entry still has the
-- given token (a hold the session lost, or is releasing).
-- Arguments: sessionRemoveHoldsArgs (sessions.go); keys: the session's
-- (keys.go, sessionKeyParts).
-- Returns the fields of the entries it removed: a hold that left the set
-- otherwise (released by its token meanwhile) is not lost.
local removed = {}
for i = 1, #fieldTokens, 2 do
  local field, tok = fieldTokens[i], fieldTokens[i + 1]
  local entry = redis.call('HGET', kHolds, field)
  if entry and string.sub(entry, 1, #tok) == tok then
    redis.call('HDEL', kHolds, field)
    removed[#removed + 1] = field
  end
end
return removed
