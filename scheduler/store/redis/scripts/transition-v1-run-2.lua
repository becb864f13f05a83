--[[
  Move a /v1 run to a new status if it is in one of the statuses it may leave,
  set fields and append the event, in one step (V1RunStore transition).

  KEYS[1] the run hash
  KEYS[2] the run's event stream
  ARGV[1] new status
  ARGV[2] time-to-live of both keys, seconds
  ARGV[3] event type
  ARGV[4] event data (JSON)
  ARGV[5] comma list of the statuses it may leave
  ARGV[6..] field, value pairs to set on the run hash

  Returns {1, event id} when moved, {0, current status} when the run is in
  another status, {-1, ''} when the run does not exist.
]]
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return {-1, ''} end
if not string.find(',' .. ARGV[5] .. ',', ',' .. cur .. ',', 1, true) then return {0, cur} end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local id = redis.call('XADD', KEYS[2], '*', 'type', ARGV[3], 'data', ARGV[4])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[2]))
return {1, id}
