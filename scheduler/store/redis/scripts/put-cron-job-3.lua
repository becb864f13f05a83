--[[
  Compare-and-set of a cron job record (CronStore.put), with its job index and its place in the
  list order (cron/cron-order.ts) in the same step: a renamed job moves in the order.

  KEYS[1] the job record (JSON with `version` and `name`)
  KEYS[2] the job index (set of ids)
  KEYS[3] the list order (sorted set, score 0: `<name, ASCII letters lowered>\0<id>`)
  ARGV[1] expected: a version number or 'absent' (no record)
  ARGV[2] the record to store (JSON, version already incremented)
  ARGV[3] the job id
  ARGV[4] its member in the list order

  Returns 1 when written, 0 when the stored version did not match.
]]
local cur = redis.call('GET', KEYS[1])
local expected = ARGV[1]
if expected == 'absent' then
  if cur then return 0 end
else
  if not cur then return 0 end
  local old = cjson.decode(cur)
  if tostring(old['version']) ~= expected then return 0 end
  local name = old['name']
  if type(name) ~= 'string' then name = '' end
  local was = string.lower(name) .. '\0' .. ARGV[3]
  if was ~= ARGV[4] then redis.call('ZREM', KEYS[3], was) end
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[4])
return 1
