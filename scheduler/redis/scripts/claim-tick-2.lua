--[[
  Claim a loop or heartbeat occurrence for its turn (LoopStore.claimTick):
  the fire decision was taken over the record at ARGV[1]; the claim holds only
  if the record is still at that version and no other occurrence is in flight.

  KEYS[1] the schedule's record (JSON with `version`)
  KEYS[2] the schedule's in-flight mark (JSON with `occurrenceId`)

  ARGV[1] the record version the decision was taken over
  ARGV[2] the new in-flight mark (JSON)
  ARGV[3] mark time-to-live, ms
  ARGV[4] occurrence id being claimed

  Returns {'ok'} claimed (mark set); {'changed'} the record changed or is gone
  (re-read and decide again); {'inflight', mark} another occurrence is in flight.
]]
local cur = redis.call('GET', KEYS[1])
if not cur then return {'changed'} end
if tostring(cjson.decode(cur)['version']) ~= ARGV[1] then return {'changed'} end
local mark = redis.call('GET', KEYS[2])
if mark and cjson.decode(mark)['occurrenceId'] ~= ARGV[4] then return {'inflight', mark} end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {'ok'}
