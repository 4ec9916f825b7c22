-- Stores a schedule (store.Schedules.PutSchedule). Keys: kSpec, the
-- namespace's schedule records (hash: queue NUL name -> "last µs|rest",
-- rest the record schedules.go encodes), kPayload, their payloads (same
-- fields), kCount, every namespace's count of schedules (hash: namespace
-- -> count). All under one hash tag, with no expiry: a schedule lives
-- until it is deleted.
-- Arguments: schedulePutArgs (schedules.go).
-- Returns OK stored; NO the namespace has max schedules and this one is
-- new.
local old = redis.call('HGET', kSpec, field)
if old then
  local oldLast = tonumber(string.match(old, '^(%d+)|'))
  if not oldLast then corrupt('schedule record') end
  last = oldLast -- a tick due but not yet enqueued is not skipped
else
  if tonumber(redis.call('HGET', kCount, ns) or '0') >= max then return NO end
  redis.call('HINCRBY', kCount, ns, 1)
end
redis.call('HSET', kSpec, field, s(last) .. '|' .. rest)
redis.call('HSET', kPayload, field, payload)
return OK
