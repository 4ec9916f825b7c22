-- Stores a runtime rate-limit policy (store.Policies.PutPolicy). Keys:
-- kPolicies, the namespace's policies (hash: name -> spec), kVersions,
-- the version of each namespace that has policies (hash: namespace ->
-- version), kVersion, the version of all (a counter: every change takes
-- the next, so a namespace's version never comes back; made at base, a
-- random number, so that a Redis that lost it, restarted empty, does not
-- hand out versions an instance saw before). All under one hash tag, with
-- no expiry: a policy lives until it is deleted.
-- Arguments: policyPutArgs (policies.go).
-- Returns OK stored, a new policy; REPLACED stored over one of the same
-- name; NO the namespace has max policies and this one is new.
local created = redis.call('HEXISTS', kPolicies, name) == 0
if created and redis.call('HLEN', kPolicies) >= max then return NO end
redis.call('HSET', kPolicies, name, spec)
if redis.call('EXISTS', kVersion) == 0 then redis.call('SET', kVersion, s(base)) end
redis.call('HSET', kVersions, ns, redis.call('INCR', kVersion))
if created then return OK end
return REPLACED
