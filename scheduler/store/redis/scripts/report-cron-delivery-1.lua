--[[
  Apply the gateway's report on one delivery of a cron run
  (scheduler/cron/delivery-report.ts). A delivery with a final outcome
  (`sent`, `failed`) is never changed again.

  KEYS[1] the job's runs (hash)
  ARGV[1] run occurrence id, ARGV[2] delivery target, ARGV[3] patch JSON
  (status, evidence, error, message_ids, will_retry, attempts, reported_at)

  Returns 1 when applied, 2 when the delivery was final already, 0 when the
  run (trimmed from the history) or the target is not there.
]]
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local run = cjson.decode(raw)
local patch = cjson.decode(ARGV[3])
local found = 0
for _, d in ipairs(run['deliveries']) do
  if d['target'] == ARGV[2] then
    if d['status'] == 'sent' or d['status'] == 'failed' then return 2 end
    for k, v in pairs(patch) do d[k] = v end
    if patch['status'] == 'sent' then
      d['error'] = nil
      d['will_retry'] = nil
    end
    found = 1
  end
end
if found == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(run))
return 1
