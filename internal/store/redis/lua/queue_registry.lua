-- Notes queue names in a namespace's registry (store.QueueActivity):
-- kNames, a sorted set of names by the minute (µs) they were last active,
-- of which names older than horizon and all but the newest max are
-- deleted; it expires ttl µs after its last write.
-- Arguments: queueRegistryArgs (activity.go).
-- Returns OK.
for _, name in ipairs(names) do redis.call('ZADD', kNames, s(minute), name) end
redis.call('ZREMRANGEBYSCORE', kNames, '-inf', '(' .. s(horizon))
redis.call('ZREMRANGEBYRANK', kNames, 0, -(max + 1))
expireAt(kNames, now + ttl)
return OK
