-- A lock's release by its solo holder's token (hold_prelude.lua's solo),
-- or by a token that holds nothing, while nobody waits and no holder is in
-- the holder keys: in a script that reads nothing but the lock's meta.
-- Anything else is answered SLOW, and coordd runs hold_release.lua.
-- Arguments: holdReleaseSoloArgs (holds.go).
-- Returns hold_release.lua's replies, with no hand-offs: {OK, µs it was
-- held, now, 0} released; {NO, now, 0} not held; or {SLOW}.
local m = redis.call('HMGET', kMeta, 'seq', 'du', 'x', 'ht', 'hr')
local seq, du, x, ht, hr = m[1], m[2], m[3], m[4], m[5]
if seq or x or (du and tonumber(du) > now) then return {SLOW} end
if ht ~= tok then return {NO, now, 0} end
local r = dec(hr)
redis.call('HDEL', kMeta, 'ht', 'hr')
soloLeft(r)
if r.dl <= now then return {NO, now, 0} end
return {OK, now - r.acq, now, 0}
