--[[
  Record the store's shard count unless one is recorded already (assertShardCount).

  KEYS[1] the fleet-wide shard-count marker
  ARGV[1] this process's shard count

  Returns the recorded count (the existing one, or ARGV[1] when it was free).
]]
local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
