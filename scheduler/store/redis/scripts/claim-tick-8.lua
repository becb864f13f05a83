--[[
  Start a loop or heartbeat occurrence in one step (TickClaim.claimTick,
  scheduler/loop/tick-claim.ts): take the session's turn lock, claim the
  occurrence, mark it in flight, tell clients it started, answer the length
  of its occurrence's journal (0 spares the turn the journal's read) and, for
  an agent turn, read the transcript it runs on (a command turn gets only its
  new input, so ARGV[11] '0' spares the read).

  The claim rule, written here only: the gate decided to fire over one read of
  the loop record, the session's goal and its pending user input; the claim
  holds only if all three are still as read and no other occurrence of the
  schedule is in flight. So the fire decision, the coalescing rule, the tick
  number and the order "user input, then goal, then ticks" all hold against
  the state at claim time. Later occurrences wait for an in-flight one, so a
  tick whose worker died is completed by another worker instead of being
  overtaken. The turn lock is taken first (free, or already held by this job:
  a job that finds its own id is a retry on another worker) and stays held
  whatever the claim says; the caller releases it.

  KEYS[1] the schedule's record (JSON with `version`)
  KEYS[2] the schedule's in-flight mark (JSON with `occurrenceId`)
  KEYS[3] the session's goal record (JSON with `version`)
  KEYS[4] the session's pending user input (sorted set)
  KEYS[5] the session's turn lock (string: the holding job id)
  KEYS[6] the session's event stream
  KEYS[7] the session's transcript (list of JSON messages)
  KEYS[8] the occurrence's turn journal (list)

  ARGV[1] the record version the decision was taken over
  ARGV[2] the new in-flight mark (JSON)
  ARGV[3] mark time-to-live, ms
  ARGV[4] occurrence id being claimed
  ARGV[5] the goal version the gate read ('' = no goal)
  ARGV[6] the number of pending-input entries the gate read
  ARGV[7] turn lock holder (job id)
  ARGV[8] turn lock time-to-live, ms
  ARGV[9] event stream maxlen (approximate)
  ARGV[10] `tick.started` event data (JSON)
  ARGV[11] '0': no transcript (a command turn); else (or absent) it is returned

  Returns {'busy'} another job holds the turn lock (nothing written);
  {'changed'} the record, the goal or the pending input changed, or the
  record is gone (lock held; re-read and decide again); {'inflight', mark}
  another occurrence is in flight (lock held); {'ok', event id, journal
  length, transcript message, ...} claimed: lock held, mark set, event added
  (with ARGV[11] '0', no transcript messages).
]]
local holder = redis.call('GET', KEYS[5])
if holder and holder ~= ARGV[7] then return {'busy'} end
redis.call('SET', KEYS[5], ARGV[7], 'PX', ARGV[8])
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
local id = redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[9], '*', 'type', 'tick.started', 'data', ARGV[10])
local out = {}
if ARGV[11] ~= '0' then out = redis.call('LRANGE', KEYS[7], 0, -1) end
table.insert(out, 1, tostring(redis.call('LLEN', KEYS[8])))
table.insert(out, 1, id)
table.insert(out, 1, 'ok')
return out
