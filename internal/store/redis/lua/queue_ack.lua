-- Deletes the message of a live claim.
-- KEYS: see queue_prelude.lua  ARGV[3]: receipt
-- Returns 1 deleted; 0 the claim is not live.
local id, m, ref = claimed(ARGV[3])
if not id then return 0 end
redis.call('ZREM', KEYS[3], ref)
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[6], id)
return 1
