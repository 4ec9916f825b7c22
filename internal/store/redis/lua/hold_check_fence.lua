-- Reports whether a live holder has a fence; changes nothing but what
-- resolve settles.
-- Arguments: holdCheckFenceArgs (holds.go).
-- Returns OK if one has, else NO. The holders read are at most the kind's
-- bound plus those expired and not yet cleaned up.
local asked = resolve() -- session-bound holders past their recorded deadline (hold_prelude.lua)
if asked then return asked end
for _, r in ipairs(holderRecords()) do
  if r.fence == fence and r.dl > now then return OK end
end
return NO
