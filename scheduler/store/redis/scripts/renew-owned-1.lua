--[[
  Extend an owned key while its holder still has it (owned-key.ts renewOwned).

  KEYS[1] the owned key (string: the holder)

  ARGV[1] holder
  ARGV[2] time-to-live, ms

  Returns 1 when extended, 0 when the key is gone or another holder has it.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
