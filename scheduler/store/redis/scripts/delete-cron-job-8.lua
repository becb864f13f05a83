--[[
  Delete a cron job with its history, claims, committed set and watch base (CronStore.delete),
  and take it out of the job index and the list order.

  KEYS[1] the job record, KEYS[2] the job index (set), KEYS[3] runs (hash),
  KEYS[4] run index (list), KEYS[5] claims (hash), KEYS[6] committed occurrences,
  KEYS[7] what its --watch kept (hash), KEYS[8] the list order (sorted set, cron/cron-order.ts)
  ARGV[1] job id

  Returns 1 when the job existed, 0 otherwise.
]]
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local name = cjson.decode(cur)['name']
if type(name) ~= 'string' then name = '' end
-- The member as cron/cron-order.ts spells it: the name with ASCII letters lowered, NUL, the id.
redis.call('ZREM', KEYS[8], string.lower(name) .. '\0' .. ARGV[1])
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
redis.call('SREM', KEYS[2], ARGV[1])
return 1
