-- Records that a schedule's tick was enqueued: its last time becomes the
-- tick's if later (store.Schedules.ScheduleTicked); a schedule that is gone
-- stays gone. Keys: kSpec, as in schedule_put.lua.
-- Arguments: scheduleTickedArgs (schedules.go).
-- Returns OK.
local old = redis.call('HGET', kSpec, field)
if not old then return OK end
local oldLast, rest = string.match(old, '^(%d+)|(.*)$')
if not oldLast then corrupt('schedule record') end
if tick > tonumber(oldLast) then redis.call('HSET', kSpec, field, s(tick) .. '|' .. rest) end
return OK
