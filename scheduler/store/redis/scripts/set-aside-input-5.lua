--[[
  Set a session input aside once (scheduler/session/set-aside.ts): it ends like a
  committed turn — its occurrence is marked committed, it leaves the pending-input
  set, an `input.set_aside` event goes on the stream — and it is kept in the
  session's set-aside list, so nothing is lost and the session's next input runs.

  KEYS[1] the session's committed occurrences (sorted set: occurrence id -> commit time ms)
  KEYS[2] event stream
  KEYS[3] the session's set-aside list (JSON entries, newest first)
  KEYS[4] the session's pending-input sorted set
  KEYS[5] the shard's sessions with input set aside (sorted set: session id -> newest set-aside time ms)

  ARGV[1] occurrence id
  ARGV[2] now, epoch ms
  ARGV[3] how long a committed occurrence is remembered, ms
  ARGV[4] event stream maxlen (approximate)
  ARGV[5] event data (JSON)
  ARGV[6] the set-aside entry (JSON)
  ARGV[7] entries kept in the list
  ARGV[8] how long the list is kept after its newest entry, ms
  ARGV[9] session id

  Returns {1, event id} set aside; {0, ''} the occurrence was committed before
  (it only leaves the pending-input set).
]]
local occ = ARGV[1]
local now = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
redis.call('ZREM', KEYS[4], occ)
if redis.call('ZSCORE', KEYS[1], occ) then return {0, ''} end
local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'type', 'input.set_aside', 'data', ARGV[5])
redis.call('LPUSH', KEYS[3], ARGV[6])
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[7]) - 1)
redis.call('PEXPIRE', KEYS[3], ARGV[8])
redis.call('ZADD', KEYS[5], now, ARGV[9])
redis.call('ZADD', KEYS[1], now, occ)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(now - window))
redis.call('PEXPIRE', KEYS[1], window)
return {1, id}
