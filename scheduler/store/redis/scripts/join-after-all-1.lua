--[[
  A parent's run joins the window of a job that waits for all its parents (`--after-all`,
  CronStore.joinAfterAll): kept as that parent's run unless a later one of it is kept already, or a
  run of the job took this one or a later one (a hand-off made again adds nothing).

  KEYS[1] the job's window (hash: run:<parent> → {"occurrence_id","at","context"}, done:<parent> → {"occurrence_id","at"})

  ARGV[1] parent job id
  ARGV[2] the parent run's occurrence id
  ARGV[3] when it ended (epoch ms)
  ARGV[4] the entry to keep (JSON with occurrence_id, at, context)

  Returns the hash's fields and values (HGETALL).
]]
local at = tonumber(ARGV[3])
local done = redis.call('HGET', KEYS[1], 'done:' .. ARGV[1])
if done then
  local d = cjson.decode(done)
  if d.occurrence_id == ARGV[2] or tonumber(d.at) >= at then return redis.call('HGETALL', KEYS[1]) end
end
local cur = redis.call('HGET', KEYS[1], 'run:' .. ARGV[1])
if cur and tonumber(cjson.decode(cur).at) > at then return redis.call('HGETALL', KEYS[1]) end
redis.call('HSET', KEYS[1], 'run:' .. ARGV[1], ARGV[4])
return redis.call('HGETALL', KEYS[1])
