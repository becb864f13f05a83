--[[
  Delete a cron job with its history, claims, committed set and watch base (CronStore.delete).

  KEYS[1] the job record, KEYS[2] the job index (set), KEYS[3] runs (hash),
  KEYS[4] run index (list), KEYS[5] claims (hash), KEYS[6] committed occurrences,
  KEYS[7] what its --watch kept (hash)
  ARGV[1] job id

  Returns 1 when the job existed, 0 otherwise.
]]
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
redis.call('SREM', KEYS[2], ARGV[1])
return 1
