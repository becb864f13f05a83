--[[
  Commit a finished turn once per occurrence (SessionStore.commitTurn).

  KEYS[1] the session's committed occurrences (sorted set: occurrence id -> commit time ms)
  KEYS[2] transcript (list)
  KEYS[3] event stream
  KEYS[4] versioned record that changes with the turn (or KEYS[1] when none)
  KEYS[5] in-flight mark to release (or KEYS[1] when none)
  KEYS[6] the session's turn lock to release (or KEYS[1] when none)
  KEYS[7] the occurrence's turn journal, deleted with the commit (or KEYS[1] when none)

  ARGV[1] occurrence id
  ARGV[2] now, epoch ms
  ARGV[3] how long a committed occurrence is remembered, ms
  ARGV[4] transcript cap (messages)
  ARGV[5] event stream maxlen (approximate)
  ARGV[6] event type
  ARGV[7] event data (JSON)
  ARGV[8] expected record version ('' = no record)
  ARGV[9] new record JSON
  ARGV[10] occurrence id whose in-flight mark is released ('' = none)
  ARGV[11] turn lock holder whose lock is released on commit ('' = none)
  ARGV[12] R: messages of a compacted transcript that replace the stored one (0 = none)
  ARGV[13] the stored transcript's length when it was read (with R > 0)
  ARGV[14] the stored transcript's last message when it was read ('' = it was empty)
  ARGV[15..14+R] the compacted transcript (JSON), replacing the stored one only
           when it is still as it was read; otherwise the compaction is dropped
           and only the new messages are appended (nothing said is lost)
  ARGV[15+R..] transcript messages to append (JSON)

  Returns {1, event id} committed (in-flight mark and turn lock released when
  still theirs, the turn's journal deleted); {0, ''} this occurrence was committed before; {-1, ''} the
  record changed since it was read (nothing written, nothing released).

  The committed set keeps only occurrences committed within the window, so a
  session has one small key for this however many turns it runs.
]]
local occ = ARGV[1]
local now = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], occ) then return {0, ''} end
if ARGV[8] ~= '' then
  local cur = redis.call('GET', KEYS[4])
  if not cur then return {-1, ''} end
  if tostring(cjson.decode(cur)['version']) ~= ARGV[8] then return {-1, ''} end
  redis.call('SET', KEYS[4], ARGV[9])
end
local r = tonumber(ARGV[12])
local first = 15 + r
if r > 0 then
  local len = redis.call('LLEN', KEYS[2])
  local last = len > 0 and redis.call('LINDEX', KEYS[2], -1) or ''
  if len == tonumber(ARGV[13]) and last == ARGV[14] then
    redis.call('DEL', KEYS[2])
    for i = 15, 14 + r do redis.call('RPUSH', KEYS[2], ARGV[i]) end
  end
end
for i = first, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
if #ARGV >= first then redis.call('LTRIM', KEYS[2], -tonumber(ARGV[4]), -1) end
local id = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'type', ARGV[6], 'data', ARGV[7])
if ARGV[10] ~= '' then
  local mark = redis.call('GET', KEYS[5])
  if mark and cjson.decode(mark)['occurrenceId'] == ARGV[10] then redis.call('DEL', KEYS[5]) end
end
if ARGV[11] ~= '' and redis.call('GET', KEYS[6]) == ARGV[11] then redis.call('DEL', KEYS[6]) end
if KEYS[7] ~= KEYS[1] then redis.call('DEL', KEYS[7]) end
redis.call('ZADD', KEYS[1], now, occ)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(now - window))
redis.call('PEXPIRE', KEYS[1], window)
return {1, id}
