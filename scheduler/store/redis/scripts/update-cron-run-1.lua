--[[
  Replace a recorded run (delivery outcomes) if it is still in the history
  (CronStore.updateRun). A delivery the gateway already reported on
  (report-cron-delivery-1.lua: it has `reported_at`) keeps that report when
  the new JSON says `queued` or `pending`: the worker writes its view after
  queueing, and the gateway may have sent (or failed) the reply before that.

  KEYS[1] the job's runs (hash)
  ARGV[1] occurrence id, ARGV[2] run JSON

  Returns 1 when replaced, 0 when the run is no longer kept.
]]
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
local new = ARGV[2]
local reported = {}
local any = false
for _, d in ipairs(cjson.decode(cur)['deliveries']) do
  if d['reported_at'] then
    reported[d['target']] = d
    any = true
  end
end
if any then
  local run = cjson.decode(new)
  for i, d in ipairs(run['deliveries']) do
    local r = reported[d['target']]
    if r and (d['status'] == 'queued' or d['status'] == 'pending') then run['deliveries'][i] = r end
  end
  new = cjson.encode(run)
end
redis.call('HSET', KEYS[1], ARGV[1], new)
return 1
