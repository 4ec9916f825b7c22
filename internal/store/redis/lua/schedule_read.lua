-- Reads schedules (store.Schedules' ListSchedules, SchedulePayload and
-- ScheduleNamespaces, by what): keys as in schedule_put.lua.
-- Arguments: scheduleReadArgs (schedules.go).
-- Returns, for "list", the namespace's records as HGETALL gives them; for
-- "payload", {payload} or {}; for "namespaces", the namespaces.
if what == 'list' then return redis.call('HGETALL', kSpec) end
if what == 'payload' then
  local p = redis.call('HGET', kPayload, field)
  if not p then return {} end
  return {p}
end
return redis.call('HKEYS', kCount)
