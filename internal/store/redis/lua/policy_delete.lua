-- Deletes a runtime rate-limit policy (store.Policies.DeletePolicy); keys
-- as in policy_put.lua. A namespace left without policies leaves
-- kVersions; the version of all moves either way.
-- Arguments: policyArgs (policies.go).
-- Returns OK deleted; NO there was none.
if redis.call('HDEL', kPolicies, name) == 0 then return NO end
if redis.call('EXISTS', kVersion) == 0 then redis.call('SET', kVersion, s(base)) end
local v = redis.call('INCR', kVersion)
if redis.call('EXISTS', kPolicies) == 1 then
  redis.call('HSET', kVersions, ns, v)
else
  redis.call('HDEL', kVersions, ns)
end
return OK
