-- Reads runtime rate-limit policies (store.Policies' ListPolicies and
-- PolicyVersions, by what): keys as in policy_put.lua.
-- Arguments: policyReadArgs (policies.go).
-- Returns, for "list", the namespace's policies as HGETALL gives them; for
-- "versions", the version of all (0 before any change), then, unless it is
-- known, every namespace's version as HGETALL gives them.
if what == 'list' then return redis.call('HGETALL', kPolicies) end
local v = tonumber(redis.call('GET', kVersion) or '0')
if v == known then return {v} end
local out = redis.call('HGETALL', kVersions)
table.insert(out, 1, v)
return out
