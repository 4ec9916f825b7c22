-- Reports whether a live holder has a fence; changes nothing.
-- KEYS: hold_prelude.lua's
-- ARGV[5]: the fence
-- Returns OK if one has, else NO. The holders read are at most the kind's
-- bound plus those expired and not yet cleaned up.
local fence = tonumber(ARGV[5])
local recs = redis.call('HVALS', KEYS[1])
for i = 1, #recs do
  local r = dec(recs[i])
  if r.fence == fence and r.dl > now then return OK end
end
return NO
