--[[
  Take an owned key (owned-key.ts acquireOwned): when it is free, or already
  held by the same holder (then its time-to-live is renewed).

  KEYS[1] the owned key (string: the holder)

  ARGV[1] holder
  ARGV[2] time-to-live, ms

  Returns 1 when held by ARGV[1] now, 0 when another holder has it.
]]
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
