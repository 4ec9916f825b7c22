-- Deletes a schedule (store.Schedules.DeleteSchedule); keys as in
-- schedule_put.lua.
-- Arguments: scheduleArgs (schedules.go).
-- Returns OK deleted; NO there was none.
if redis.call('HDEL', kSpec, field) == 0 then return NO end
redis.call('HDEL', kPayload, field)
if redis.call('HINCRBY', kCount, ns, -1) <= 0 then redis.call('HDEL', kCount, ns) end
return OK
