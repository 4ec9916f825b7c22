-- A partitioned queue's reservations (store.Queues' ReserveClaims,
-- ReleaseClaims, HoldReservations, by mode): kSlots, a sorted set of
-- tokens by the end of their reservation µs, in the queue's slot, counted
-- against the queue's caps (kConf) as Claim counts its claims. It expires
-- with its last reservation.
-- Arguments: queueSlotsArgs (queue.go).
-- Returns, for "reserve", {how many reserved, µs until what held the rest
-- back frees up (0: nothing to wait for), the held-back code as Claim's};
-- otherwise {OK}.
redis.call('ZREMRANGEBYSCORE', kSlots, '-inf', s(now))
local c = conf()
if mode == 'reserve' then
  local want, held = capSlots(c, #tokens, function() return redis.call('ZCARD', kSlots) end)
  local took, nxt = capRate(c, want)
  if took < want then held = 3 end
  want = took
  for i = 1, want do redis.call('ZADD', kSlots, s(now + hold), tokens[i]) end
  if want > 0 then expireAt(kSlots, latest(kSlots)) end
  if held == 2 then -- a slot frees at the first reservation's end
    local _, d = firstIn(kSlots, '(' .. s(now), '+inf')
    if d then nxt = d - now end
  end
  return {want, nxt, held}
end
if mode == 'hold' then
  for _, t in ipairs(tokens) do redis.call('ZADD', kSlots, s(now + hold), t) end
  if #tokens > 0 then expireAt(kSlots, latest(kSlots)) end
  return {OK}
end
local live, freed = redis.call('ZCARD', kSlots), 0
for _, t in ipairs(tokens) do freed = freed + redis.call('ZREM', kSlots, t) end
if unused and freed > 0 and c.rl > 0 then
  redis.call('HSET', kConf, 'tat', string.format('%.17g', rateRefund(c, freed)))
end
if freed > 0 and c.max > 0 and live >= c.max then redis.call('SPUBLISH', wakeChannel, '') end
return {OK}
