--[[
  Append an event to a /v1 run's stream only while the run is running.

  KEYS[1] the run hash
  KEYS[2] the run's event stream
  ARGV[1] event type
  ARGV[2] event data (JSON)

  Returns the event id, or '' when the run is not running.
]]
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return '' end
return redis.call('XADD', KEYS[2], '*', 'type', ARGV[1], 'data', ARGV[2])
