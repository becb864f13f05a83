--[[
  Record a cron run once per occurrence (CronStore.commitRun), atomically with
  the job's new state and, when asked, the reply on the job's session stream.

  KEYS[1] the job's committed occurrences (sorted set: occurrence id -> commit time ms)
  KEYS[2] the job record (JSON with `version`)
  KEYS[3] the job's runs (hash: occurrence id -> run JSON)
  KEYS[4] the job's run index (list, newest first)
  KEYS[5] recent runs of all jobs (list, newest first)
  KEYS[6] the job's session event stream
  KEYS[7] the job's claims (hash)
  KEYS[8] the occurrence's turn journal (deleted with the commit)

  ARGV[1] run JSON
  ARGV[2] occurrence id
  ARGV[3] now, epoch ms
  ARGV[4] how long a committed occurrence is remembered, ms
  ARGV[5] runs kept per job
  ARGV[6] recent runs kept
  ARGV[7] expected job version
  ARGV[8] new job JSON
  ARGV[9] local delivery event data ('' = no local delivery)
  ARGV[10] event stream maxlen (approximate)
  ARGV[11] recent runs entry ('<job id> <occurrence id>')
  ARGV[12] with a local delivery: the token the run JSON holds where its `local` target's evidence goes (the
           target is marked delivered in it already); each occurrence is replaced by the reply event's stream id

  Returns {1, event id or ''} recorded (the claim and the turn's journal gone); {0, ''} recorded before; {-1, ''} the
  job changed since it was read; {-2, ''} the job is gone.
]]
local occ = ARGV[2]
local now = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
if redis.call('ZSCORE', KEYS[1], occ) then return {0, ''} end
local cur = redis.call('GET', KEYS[2])
if not cur then return {-2, ''} end
if tostring(cjson.decode(cur)['version']) ~= ARGV[7] then return {-1, ''} end
redis.call('SET', KEYS[2], ARGV[8])
local run = ARGV[1]
local eventId = ''
if ARGV[9] ~= '' then
  eventId = redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[10], '*', 'type', 'reply', 'data', ARGV[9])
  -- A plain find (no pattern), spliced: cheaper than decoding and encoding the run.
  local parts, from = {}, 1
  while true do
    local a, b = string.find(run, ARGV[12], from, true)
    if not a then break end
    parts[#parts + 1] = string.sub(run, from, a - 1)
    from = b + 1
  end
  parts[#parts + 1] = string.sub(run, from)
  run = table.concat(parts, eventId)
end
redis.call('HSET', KEYS[3], occ, run)
redis.call('LPUSH', KEYS[4], occ)
local limit = tonumber(ARGV[5])
while redis.call('LLEN', KEYS[4]) > limit do
  local old = redis.call('RPOP', KEYS[4])
  redis.call('HDEL', KEYS[3], old)
end
redis.call('LPUSH', KEYS[5], ARGV[11])
redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[6]) - 1)
redis.call('HDEL', KEYS[7], occ)
redis.call('DEL', KEYS[8])
redis.call('ZADD', KEYS[1], now, occ)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(now - window))
redis.call('PEXPIRE', KEYS[1], window)
return {1, eventId}
