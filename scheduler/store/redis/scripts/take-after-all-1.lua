--[[
  A run of a job that waits for all its parents (`--after-all`, CronStore.takeAfterAll) takes the
  parents' runs it was queued with out of its window: each entry still naming that run is removed,
  and that run is recorded as the parent's last taken (never going back to an earlier one).

  KEYS[1] the job's window (hash, as join-after-all-1.lua)

  ARGV triples: parent job id, the run's occurrence id, when it ended (epoch ms)

  Returns the number of entries removed.
]]
local removed = 0
for i = 1, #ARGV, 3 do
  local parent, occurrence, at = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local cur = redis.call('HGET', KEYS[1], 'run:' .. parent)
  if cur and cjson.decode(cur).occurrence_id == occurrence then
    removed = removed + redis.call('HDEL', KEYS[1], 'run:' .. parent)
  end
  local done = redis.call('HGET', KEYS[1], 'done:' .. parent)
  if not done or tonumber(cjson.decode(done).at) <= at then
    redis.call('HSET', KEYS[1], 'done:' .. parent, cjson.encode({ occurrence_id = occurrence, at = at }))
  end
end
return removed
