--[[
  Claim a cron occurrence for a holder (a BullMQ job id) before its turn
  starts (CronStore.claim), against the job record as it is now.

  KEYS[1] the job record (JSON, scheduler/cron/cron-record-codec.ts)
  KEYS[2] the job's claims (hash: occurrence id -> {holder, attempt, at})
  KEYS[3] the job's committed occurrences (sorted set: occurrence id -> commit time ms)
  KEYS[4] the occurrence's turn journal (list; its length is answered: 0 spares the journal's read)
  KEYS[5] the turn lock of the job's session `cron:<id>` (string: the holder; owned-key.ts), taken with the
          claim when ARGV[9] asks for it

  ARGV[1] occurrence id
  ARGV[2] holder
  ARGV[3] generation the occurrence belongs to
  ARGV[4] '1' for a run on request (exempt from state, generation and the repeat budget); '2' for a run after
          another job's run (`--after`: the job must be scheduled, exempt from generation and the repeat budget);
          else '0'
  ARGV[5] due time of the occurrence, epoch ms (kept for the caller's logs; the coalescing
          rule is applied when the occurrence is read, scheduler/cron/misfire.ts)
  ARGV[6] now, epoch ms
  ARGV[7] how long a claim or a committed occurrence is remembered, ms
  ARGV[8] '1' when the occurrence is claimed to be recorded as skipped (overlap, misfire), else '0'
  ARGV[9] '' to claim without the turn lock; else its time-to-live, ms: the lock is taken with the claim
          (free, or held by this holder already: as acquire-owned-1.lua), or neither is ('locked')

  Returns {'ok', attempt, journal length} claimed (attempt 1 the first time, +1 each time the
  same holder claims again: a hand-back, a stalled or retried job);
  {reason, 0} otherwise: 'removed', 'done' (committed before), 'claimed'
  (another holder has it), 'stale' (older generation), 'repeat-used' (the `--repeat` budget is
  taken by runs completed and runs in flight), 'locked' (the turn lock asked for is another
  holder's), or the job's state when not scheduled.

  `--repeat N` is a budget of N scheduled runs: completed runs plus claims of
  scheduled occurrences still in flight (held by other holders) must stay below
  N for a new scheduled occurrence to be claimed, so overlapping runs
  (`--overlap allow`) or a skip racing the last run never make an N+1st.
  Manual runs are outside the budget.
]]
local occ = ARGV[1]
local now = tonumber(ARGV[6])
local window = tonumber(ARGV[7])
local cur = redis.call('GET', KEYS[1])
if not cur then return {'removed', 0} end
if redis.call('ZSCORE', KEYS[3], occ) then return {'done', 0} end
-- Decoded once, for the state and generation checks and the repeat budget (a run on request needs neither).
local job = ARGV[4] ~= '1' and cjson.decode(cur) or nil
if job then
  if job['state'] ~= 'scheduled' then return {job['state'], 0} end
  if ARGV[4] == '0' and tostring(job['generation']) ~= ARGV[3] then return {'stale', 0} end
end
local attempt = 1
local held = redis.call('HGET', KEYS[2], occ)
if held then
  local claim = cjson.decode(held)
  if claim['holder'] ~= ARGV[2] then return {'claimed', 0} end
  attempt = claim['attempt'] + 1
end
if ARGV[4] == '0' and not held then
  -- The compact record (cron-record-codec.ts) omits `repeat` at its default: no budget.
  local rep = job['repeat']
  local times = type(rep) == 'table' and rep['times'] or nil
  if type(times) == 'number' then
    local taken = rep['completed'] or 0
    local all = redis.call('HGETALL', KEYS[2])
    for i = 1, #all, 2 do
      local c = cjson.decode(all[i + 1])
      if not c['manual'] and not c['skip'] and c['at'] >= now - window then taken = taken + 1 end
    end
    if taken >= times then return {'repeat-used', 0} end
  end
end
if ARGV[9] ~= '' then
  local lockHolder = redis.call('GET', KEYS[5])
  if lockHolder and lockHolder ~= ARGV[2] then return {'locked', 0} end
  redis.call('SET', KEYS[5], ARGV[2], 'PX', ARGV[9])
end
redis.call('HSET', KEYS[2], occ, cjson.encode({holder = ARGV[2], attempt = attempt, at = now, manual = ARGV[4] ~= '0', skip = ARGV[8] == '1'}))
-- Claims of occurrences that never committed (failed for good) are dropped once older than the window.
if redis.call('HLEN', KEYS[2]) > 16 then
  local all = redis.call('HGETALL', KEYS[2])
  for i = 1, #all, 2 do
    if cjson.decode(all[i + 1])['at'] < now - window then redis.call('HDEL', KEYS[2], all[i]) end
  end
end
redis.call('PEXPIRE', KEYS[2], window)
return {'ok', attempt, redis.call('LLEN', KEYS[4])}
