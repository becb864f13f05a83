--[[
  Hand a /v1 run back to the queue (cut by a drain): status queued, worker
  fields cleared, a run.requeued event appended.

  KEYS[1] the run hash
  KEYS[2] the run's event stream
  ARGV[1] time-to-live of both keys, seconds
  ARGV[2] event data (JSON)
  ARGV[3] comma list of the statuses it may leave

  Returns 1 when requeued, 0 otherwise.
]]
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return 0 end
if not string.find(',' .. ARGV[3] .. ',', ',' .. cur .. ',', 1, true) then return 0 end
redis.call('HSET', KEYS[1], 'status', 'queued')
redis.call('HDEL', KEYS[1], 'started_at', 'worker', 'error', 'finished_at')
redis.call('XADD', KEYS[2], '*', 'type', 'run.requeued', 'data', ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[1]))
return 1
