--[[
  Delete an owned key only while its holder still has it (owned-key.ts releaseOwned).

  KEYS[1] the owned key (string: the holder)

  ARGV[1] holder

  Returns 1 when deleted, 0 otherwise.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
