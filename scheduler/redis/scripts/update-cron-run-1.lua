--[[
  Replace a recorded run (delivery outcomes) if it is still in the history
  (CronStore.updateRun).

  KEYS[1] the job's runs (hash)
  ARGV[1] occurrence id, ARGV[2] run JSON

  Returns 1 when replaced, 0 when the run is no longer kept.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
