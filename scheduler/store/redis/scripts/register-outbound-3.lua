--[[
  Give an outbound reply its place in its chat's queue order, once
  (scheduler/delivery/outbound.ts registerOutbound; the gateway calls it too for a job
  whose producer died before registering it).

  KEYS[1] the reply's send record (hash), KEYS[2] the chat's order (sorted set),
  KEYS[3] the sequence counter
  ARGV[1] occurrence id, ARGV[2] send record TTL s, ARGV[3] order TTL s

  Returns the reply's sequence number (the first one given, when registered before).
]]
local s = redis.call('HGET', KEYS[1], 'seq')
if s then return s end
s = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'seq', s)
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], s, ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return s
