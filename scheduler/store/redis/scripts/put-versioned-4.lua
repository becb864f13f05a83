--[[
  Compare-and-set of a versioned JSON record (putVersioned): write only over
  the version it was read at; the record's index set and up to two list
  orders (sorted sets, score 0: store/lex-index.ts) take it in the same step.

  KEYS[1] the record (JSON string with a `version` field)
  KEYS[2] the index set the record belongs to
  KEYS[3], KEYS[4] list orders (sorted sets) the record belongs to
  ARGV[1] expected: a version number, 'absent' (no record) or 'any'
  ARGV[2] the record to store (JSON, version already incremented)
  ARGV[3] the record's member in the index set
  ARGV[4], ARGV[5] its members of KEYS[3] and KEYS[4]; '' for none

  Returns 1 when written, 0 when the stored version did not match.
]]
local cur = redis.call('GET', KEYS[1])
local expected = ARGV[1]
if expected == 'absent' then
  if cur then return 0 end
elseif expected ~= 'any' then
  if not cur then return 0 end
  if tostring(cjson.decode(cur)['version']) ~= expected then return 0 end
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
if ARGV[4] ~= '' then redis.call('ZADD', KEYS[3], 0, ARGV[4]) end
if ARGV[5] ~= '' then redis.call('ZADD', KEYS[4], 0, ARGV[5]) end
return 1
