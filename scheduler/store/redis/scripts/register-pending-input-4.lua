--[[
  Register a pending user input of a session in arrival order (enqueueInput).
  Score = received ms x 1000 plus a per-session sequence (mod 1000), so inputs
  of the same millisecond keep the order in which they were registered.

  KEYS[1] the session's pending-input sorted set
  KEYS[2] the session's input sequence counter
  KEYS[3] the shard's session index set
  KEYS[4] the shard's session list order (sorted set, score 0: store/lex-index.ts)
  ARGV[1] received at, epoch ms
  ARGV[2] the input's occurrence id
  ARGV[3] session id

  Returns 1 when registered, 0 when the occurrence was already pending.
]]
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
local seq = redis.call('INCR', KEYS[2]) % 1000
redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) * 1000 + seq, ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
redis.call('ZADD', KEYS[4], 0, ARGV[3])
return 1
