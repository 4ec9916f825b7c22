-- Reads or changes the queue's settings (kConf): store.Queues'
-- QueueSettings (mode "get"), PauseQueue ("pause": paused) and
-- ConfigureQueue ("caps": max, rl, rp; a new or changed rate starts with a
-- full bucket). A change wakes the queue. Settings that are all unset
-- leave no key.
-- Arguments: queueConfArgs (queue.go).
-- Returns {paused (0 or 1), max, rl, rp}.
local c = conf()
if mode == 'pause' then
  c.paused = paused
elseif mode == 'caps' then
  if c.rl ~= rl or c.rp ~= rp then c.tat = 0 end
  c.max, c.rl, c.rp = max, rl, rp
end
if mode ~= 'get' then
  redis.call('DEL', kConf)
  local f = {}
  if c.paused then f[#f + 1] = 'p'; f[#f + 1] = '1' end
  if c.max > 0 then f[#f + 1] = 'max'; f[#f + 1] = s(c.max) end
  if c.rl > 0 then
    for _, v in ipairs({'rl', s(c.rl), 'rp', s(c.rp), 'tat', string.format('%.17g', c.tat)}) do f[#f + 1] = v end
  end
  if #f > 0 then redis.call('HSET', kConf, unpack(f)) end
  redis.call('SPUBLISH', wakeChannel, '')
end
local p = 0
if c.paused then p = 1 end
return {p, c.max, c.rl, c.rp}
