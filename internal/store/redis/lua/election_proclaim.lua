-- Sets the leader's value: a new revision, waking the observers.
-- Arguments: electionProclaimArgs (holds.go).
-- Returns {OK, rev}; {NOT_LEADER} the token does not lead.
local asked = resolve() -- session-bound holders past their recorded deadline (hold_prelude.lua)
if asked then return asked end
local cleaned = clean()
local r = holder(tok)
if meta('lead') ~= tok or not r or r.dl <= now then
  if cleaned then wake() end
  keep()
  return {NOT_LEADER}
end
local rev = change(tok, r, value)
if cleaned then wake() end
keep()
return {OK, rev}
