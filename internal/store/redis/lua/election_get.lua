-- Syncs an election (a leader whose term ended is logged as gone) and
-- describes it: its leader, and the changes after a revision.
-- Arguments: electionGetArgs (holds.go).
-- Returns {leaderInfo's eight values (hold_prelude.lua), first revision
-- the log keeps (0: empty), change, ...} (changes as
-- change() in hold_prelude.lua writes them, oldest first).
local asked = resolve() -- session-bound holders past their recorded deadline (hold_prelude.lua)
if asked then return asked end
if clean() then wake() end
keep()
local out = leaderInfo()
local log = redis.call('LRANGE', kLog, 0, -1)
local first = 0
if log[1] then first = tonumber(string.match(log[1], '^(%d+)')) end
out[#out + 1] = first
if after >= 0 then
  for i = 1, #log do
    if tonumber(string.match(log[i], '^(%d+)')) > after then out[#out + 1] = log[i] end
  end
end
return out
