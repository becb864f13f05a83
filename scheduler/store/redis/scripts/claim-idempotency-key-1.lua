--[[
  Claim an Idempotency-Key for a /v1 run unless it is claimed already.

  KEYS[1] the idempotency key
  ARGV[1] value "<runId> <payloadDigest>"
  ARGV[2] time-to-live, seconds

  Returns the existing value, or '' when this call claimed the key.
]]
local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
return ''
