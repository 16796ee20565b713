"""The shared count of a connection's quotas: one Lua script, one round trip per request.

Run atomically by the store on its own clock (``TIME``), so replicas' clocks never matter. For a
request it checks, in order, the vendor's pause on the connection, the app's minute, the
connection's minute (all apps together) and the connection's day, and counts the request in all
of them only if every one admits it (a refused request is not counted: counting refusals would
keep a busy app refused for ever).

A minute is a sliding window of sixty buckets of a second each (a hash: a field per bucket, the
total ``t`` and the oldest bucket ``o`` still counted), the oldest bucket weighted by the part of
it still inside the window: exact under even load to within a bucket's share of its weight (1/60
of the limit), with no fixed-window edge where twice the limit could pass. Old buckets are dropped
as time passes, each once, so a request costs a few hash operations whatever the limit. A day is
a UTC calendar day's counter (the day and its count in a hash; vendors' daily quotas reset at
midnight UTC). Every key expires by itself.

KEYS: pause, app minute, connection minute, connection day.
ARGV: the app's limit per minute, the connection's per minute and per day (0: none), and the
minute's width in seconds (60; shorter only in tests).
Answer: ``{admitted, limit, remaining, reset_seconds, which}``; ``which`` names what decided:
1 the app's minute, 2 the connection's minute, 3 the day, 4 a pause (``reset`` is then what is
left of it, in milliseconds).
"""

SOURCE = """
local pause = redis.call('PTTL', KEYS[1])
if pause > 0 then return {0, 0, 0, pause, 4} end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local second = math.floor(now)
local width = tonumber(ARGV[4])
-- Sixty buckets a window: a second each in a minute.
local span = width / 60
local slot = math.floor(now / span)
local fraction = now / span - slot

local function used(key)
  local fields = redis.call('HMGET', key, 't', 'o')
  local total = tonumber(fields[1]) or 0
  local oldest = tonumber(fields[2]) or slot
  local cutoff = slot - 60
  if oldest < cutoff then
    if cutoff - oldest > 60 then
      redis.call('DEL', key)
      total, oldest = 0, slot
    else
      for s = oldest, cutoff - 1 do
        local count = redis.call('HGET', key, s)
        if count then
          total = total - tonumber(count)
          redis.call('HDEL', key, s)
        end
      end
      oldest = cutoff
      redis.call('HSET', key, 't', total, 'o', oldest)
    end
  end
  local edge = tonumber(redis.call('HGET', key, cutoff)) or 0
  return total - edge * fraction, oldest
end

local function reset(key, oldest)
  -- When the oldest counted bucket leaves the window, and frees what it holds.
  return math.max(1, math.ceil((oldest + 61) * span - now))
end

local tightest = {2147483647, 2147483647, 0, 0}
local checks = {}
for index, limit in ipairs({tonumber(ARGV[1]), tonumber(ARGV[2])}) do
  if limit > 0 then
    local key = KEYS[index + 1]
    local count, oldest = used(key)
    if count + 1 > limit then
      return {0, limit, 0, reset(key, oldest), index}
    end
    local remaining = math.floor(limit - count - 1)
    if remaining < tightest[2] then tightest = {limit, remaining, reset(key, oldest), index} end
    table.insert(checks, key)
  end
end

local daily = tonumber(ARGV[3])
local today = math.floor(second / 86400)
local day_left = 86400 - (second % 86400)
local day_count = 0
if daily > 0 then
  local fields = redis.call('HMGET', KEYS[4], 'd', 'c')
  if tonumber(fields[1]) == today then day_count = tonumber(fields[2]) or 0 end
  if day_count + 1 > daily then return {0, daily, 0, day_left, 3} end
  if daily - day_count - 1 < tightest[2] then
    tightest = {daily, daily - day_count - 1, day_left, 3}
  end
end

for _, key in ipairs(checks) do
  redis.call('HINCRBY', key, slot, 1)
  redis.call('HINCRBY', key, 't', 1)
  redis.call('HSETNX', key, 'o', slot)
  redis.call('PEXPIRE', key, math.ceil((width + 2 * span) * 1000))
end
if daily > 0 then
  redis.call('HSET', KEYS[4], 'd', today, 'c', day_count + 1)
  redis.call('EXPIRE', KEYS[4], day_left + 3600)
end
return {1, tightest[1], tightest[2], tightest[3], tightest[4]}
"""

# Pauses the connection for ARGV[1] milliseconds, unless a longer pause already runs.
PAUSE_SOURCE = """
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 1
"""
