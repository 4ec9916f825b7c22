-- Sets the leader's value: a new revision, waking the observers.
-- KEYS: hold_prelude.lua's (kind 'election')
-- ARGV[5]: the leader's token  ARGV[6]: the value
-- Returns {OK, rev}; {NOT_LEADER} the token does not lead.
local cleaned = clean()
local tok = ARGV[5]
local r = holder(tok)
if meta('lead') ~= tok or not r or r.dl <= now then
  if cleaned then wake() end
  keep()
  return {NOT_LEADER}
end
local rev = change(tok, r, ARGV[6])
if cleaned then wake() end
keep()
return {OK, rev}
