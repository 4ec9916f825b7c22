-- Moves a live claim's deadline to now + visibility.
-- Arguments: queueExtendArgs (queue.go).
-- Returns {OK, the new deadline}; {NO} the claim is not live.
local id, _, ref, set = claimed(receipt)
if not id then
  return {NO}
end
local deadline = now + visibility
redis.call('ZADD', set, s(deadline), ref)
if set == kLast then expireLast() end
return {OK, deadline}
