--[[
  Stop a /v1 run: a queued run is cancelled at once (with its event), a
  running run is marked stop_requested for its worker to see.

  KEYS[1] the run hash
  KEYS[2] the run's event stream
  ARGV[1] time-to-live of the event stream, seconds
  ARGV[2] the cancelled error (JSON)
  ARGV[3] now, epoch ms

  Returns 'cancelled', 'stopping', 'missing', or the run's (final) status.
]]
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return 'missing' end
if cur == 'queued' then
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'error', ARGV[2], 'finished_at', ARGV[3])
  redis.call('XADD', KEYS[2], '*', 'type', 'run.cancelled', 'data', '{"error":' .. ARGV[2] .. '}')
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[1]))
  return 'cancelled'
end
if cur == 'running' then
  redis.call('HSET', KEYS[1], 'stop_requested', '1')
  return 'stopping'
end
return cur
