-- The stored layout's version on one master (layout.go): written if the
-- master holds none, else read. It never expires: it says how every other
-- key under the prefix on this master is to be read.
-- Arguments: layoutArgs (layout.go); keys: kLayout, a key in a slot of
-- this master's (keys.go, layout).
-- Returns {OK, the version the master holds} (ours, if it held none).
local v = redis.call('GET', kLayout)
if not v then
  redis.call('SET', kLayout, version)
  v = version
end
return {OK, v}
