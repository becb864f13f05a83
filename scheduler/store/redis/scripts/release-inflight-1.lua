--[[
  Release a schedule's in-flight mark if it is still the one of an occurrence
  (LoopStore.clearInflight).

  KEYS[1] the schedule's in-flight mark (JSON with `occurrenceId`)
  ARGV[1] occurrence id

  Returns 1 when the mark was deleted, 0 otherwise.
]]
local v = redis.call('GET', KEYS[1])
if v and cjson.decode(v)['occurrenceId'] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
