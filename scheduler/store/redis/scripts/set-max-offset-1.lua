--[[
  Raise the confirmed Telegram update offset, never lower it (TelegramPoller):
  a late confirmation from a superseded poller cannot move the offset back.

  KEYS[1] the bot's confirmed-offset key
  ARGV[1] the new offset (next update id to fetch)
  ARGV[2] the key's time-to-live, seconds (refreshed either way)

  Returns 1.
]]
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) else redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 1
