--[[
  Claim a loop or heartbeat occurrence for its turn (LoopStore.claimTick).
  The gate decided to fire over one read of the loop record, the session's goal
  and its pending user input; the claim holds only if all three are still as
  read and no other occurrence of the schedule is in flight. So the fire
  decision, the coalescing rule, the tick number and the order "user input,
  then goal, then ticks" all hold against the state at claim time.

  KEYS[1] the schedule's record (JSON with `version`)
  KEYS[2] the schedule's in-flight mark (JSON with `occurrenceId`)
  KEYS[3] the session's goal record (JSON with `version`)
  KEYS[4] the session's pending user input (sorted set)

  ARGV[1] the record version the decision was taken over
  ARGV[2] the new in-flight mark (JSON)
  ARGV[3] mark time-to-live, ms
  ARGV[4] occurrence id being claimed
  ARGV[5] the goal version the gate read ('' = no goal)
  ARGV[6] the number of pending-input entries the gate read

  Returns {'ok'} claimed (mark set); {'changed'} the record, the goal or the
  pending input changed, or the record is gone (re-read and decide again);
  {'inflight', mark} another occurrence is in flight.
]]
local cur = redis.call('GET', KEYS[1])
if not cur then return {'changed'} end
if tostring(cjson.decode(cur)['version']) ~= ARGV[1] then return {'changed'} end
local goal = redis.call('GET', KEYS[3])
local goalVersion = ''
if goal then goalVersion = tostring(cjson.decode(goal)['version']) end
if goalVersion ~= ARGV[5] then return {'changed'} end
if tostring(redis.call('ZCARD', KEYS[4])) ~= ARGV[6] then return {'changed'} end
local mark = redis.call('GET', KEYS[2])
if mark and cjson.decode(mark)['occurrenceId'] ~= ARGV[4] then return {'inflight', mark} end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {'ok'}
