"""The shared count of a connection's quotas: one Lua script, one round trip per request.

Run atomically by the store on its own clock (``TIME``), so replicas' clocks never matter. For a
request it checks, in order, the vendor's pause on the connection and on the endpoint the request
calls, the app's minute, the
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

A worker may take several permits at once (a lease, for a connection hot enough that a round
trip per request would cost more than the request): they are counted when taken, so no quota
ever admits more than its limit, and those a worker did not use before its lease lapsed are
handed back with its next call (a refund to the bucket they were counted in).

A key the count makes is counted to the connection's namespace, at its largest size, by the
ledger (:mod:`gatehouse_proxy.store.shares`, whose functions the script runs with): a namespace
whose share has no room for it is answered ``which`` 6, not counted, and its worker counts that
request alone; keys that exist already are counted on, whatever the namespace holds.

KEYS: pause, app minute, connection minute, connection day, endpoints' pauses, the namespace's
ledger and held.
ARGV: the app's limit per minute, the connection's per minute and per day (0: none), the
minute's width in seconds (60; shorter only in tests), the permits wanted, the refund (how
many, the bucket and the day they were counted in), the endpoint's field in the endpoints'
pauses ("": none), and the namespace's keys and bytes at most.
Answer: ``{admitted, limit, remaining, reset_seconds, which, granted, bucket, valid_ms, day}``,
then each endpoint the connection holds paused and the milliseconds left of its pause;
``which`` names what decided: 1 the app's minute, 2 the connection's minute, 3 the day, 4 a
pause of the connection, 5 of the endpoint (``reset`` is then what is left of it, in
milliseconds), 6 the namespace's share (nothing counted); ``remaining`` is after the permits
granted; the permits, or a refusal, are good for ``valid_ms`` (until their bucket ends).
"""

SOURCE = """
local pause = redis.call('PTTL', KEYS[1])
if pause > 0 then return {0, 0, 0, pause, 4, 0, 0, 0, 0} end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000

local function told(answer)
  -- Every answer tells the worker which endpoints the fleet holds paused (field, ms left): a
  -- worker admitting from a lease checks them without asking.
  local fields = redis.call('HGETALL', KEYS[5])
  for i = 1, #fields, 2 do
    local left = math.ceil(tonumber(fields[i + 1]) - now * 1000)
    if left > 0 then
      table.insert(answer, fields[i])
      table.insert(answer, left)
    end
  end
  return answer
end

if ARGV[9] ~= '' then
  local ends = tonumber(redis.call('HGET', KEYS[5], ARGV[9]))
  if ends and ends > now * 1000 then
    return told({0, 0, 0, math.ceil(ends - now * 1000), 5, 0, 0, 0, 0})
  end
end
local second = math.floor(now)
local width = tonumber(ARGV[4])
-- Sixty buckets a window: a second each in a minute.
local span = width / 60
local slot = math.floor(now / span)
local fraction = now / span - slot
local today = math.floor(second / 86400)
local day_left = 86400 - (second % 86400)
local want = tonumber(ARGV[5])
local refund, refund_slot, refund_day = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])

local function used(key)
  local fields = redis.call('HMGET', key, 't', 'o')
  local fresh = not fields[1]
  local total = tonumber(fields[1]) or 0
  local oldest = tonumber(fields[2]) or slot
  if refund > 0 and refund_slot >= oldest then
    -- Permits a worker took and did not use go back to the bucket they were counted in.
    redis.call('HINCRBY', key, refund_slot, -refund)
    total = total - refund
    redis.call('HSET', key, 't', total)
  end
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
  return total - edge * fraction, oldest, fresh
end

local function until_next()
  -- Milliseconds until this bucket ends: what a lease is good for, and a refusal too (no room
  -- frees before the window slides on, but a refund).
  return math.floor(((slot + 1) * span - now) * 1000)
end

local function reset(oldest)
  -- When the oldest counted bucket leaves the window, and frees what it holds.
  return math.max(1, math.ceil((oldest + 61) * span - now))
end

-- What each quota has room for; the request takes what all of them have, up to what it wants.
local granted = want
local tightest = {2147483647, 2147483647, 0, 0}
local checks = {}
local fresh = {}
for index, limit in ipairs({tonumber(ARGV[1]), tonumber(ARGV[2])}) do
  if limit > 0 then
    local key = KEYS[index + 1]
    local count, oldest, new = used(key)
    local room = math.floor(limit - count)
    if room < 1 then
      return told({0, limit, 0, reset(oldest), index, 0, slot, until_next(), today})
    end
    granted = math.min(granted, room)
    if room < tightest[2] then tightest = {limit, room, reset(oldest), index} end
    table.insert(checks, key)
    if new then table.insert(fresh, {key, LEDGER_MINUTE, second + math.ceil(width + 2 * span)}) end
  end
end

local daily = tonumber(ARGV[3])
local day_count = 0
if daily > 0 then
  local fields = redis.call('HMGET', KEYS[4], 'd', 'c')
  if not fields[1] then table.insert(fresh, {KEYS[4], LEDGER_DAY, second + day_left + 3600}) end
  if tonumber(fields[1]) == today then day_count = tonumber(fields[2]) or 0 end
  if refund > 0 and refund_day == today then day_count = math.max(day_count - refund, 0) end
  local room = daily - day_count
  if room < 1 then return told({0, daily, 0, day_left, 3, 0, slot, until_next(), today}) end
  granted = math.min(granted, room)
  if room < tightest[2] then tightest = {daily, room, day_left, 3} end
end

if #fresh > 0 then
  -- New keys need room in the namespace's share: none, and nothing is counted.
  if not ledger_fits(fresh, 10) then
    return told({0, 0, 0, 0, 6, 0, slot, until_next(), today})
  end
  for _, entry in ipairs(fresh) do ledger_count(entry[1], entry[2], entry[3]) end
end

for _, key in ipairs(checks) do
  if redis.call('HINCRBY', key, slot, granted) == granted then
    -- A new bucket: the key lives a window past it.
    redis.call('HSETNX', key, 'o', slot)
    redis.call('PEXPIRE', key, math.ceil((width + 2 * span) * 1000))
  end
  redis.call('HINCRBY', key, 't', granted)
end
if daily > 0 then
  redis.call('HSET', KEYS[4], 'd', today, 'c', day_count + granted)
  redis.call('EXPIRE', KEYS[4], day_left + 3600)
end
local remaining = tightest[2] - granted
return told({
  1, tightest[1], remaining, tightest[3], tightest[4], granted, slot, until_next(), today
})
"""

# Pauses the connection for ARGV[1] milliseconds, unless a longer pause already runs, counted
# to its namespace (KEYS: the pause, the ledger and held; ARGV[2] and [3]: the namespace's keys
# and bytes at most); answers 0 when the namespace's share has no room for it.
PAUSE_SOURCE = """
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  if not ledger_fits({{KEYS[1], LEDGER_SMALL}}, 2) then return 0 end
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
  ledger_count(KEYS[1], LEDGER_SMALL, ledger_now() + math.ceil(ARGV[1] / 1000))
end
return 1
"""

# Pauses one endpoint of the connection (KEYS[2], a hash: endpoint -> when its pause ends, in
# the store's milliseconds) for ARGV[1] milliseconds, unless a longer pause of it already runs.
# A connection holds at most ARGV[3] endpoints' pauses: a vendor that asks to wait on that many
# at once is limiting the credential, and then the whole connection (KEYS[1]) is paused. Both
# are counted to the namespace (KEYS[3] and [4]: the ledger and held; ARGV[4] and [5]: its keys
# and bytes at most), the hash at its largest size.
# Answer: 1 the endpoint is paused, 2 the whole connection is, 0 neither (the namespace's share
# has no room: the worker keeps the pause alone).
ENDPOINT_PAUSE_SOURCE = """
local clock = redis.call('TIME')
local now = math.floor(tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000)
local ms = tonumber(ARGV[1])
local ends = now + ms
local known = tonumber(redis.call('HGET', KEYS[2], ARGV[2]))
if known and known >= ends then return 1 end
if not known and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then
  local fields = redis.call('HGETALL', KEYS[2])
  for i = 1, #fields, 2 do
    if tonumber(fields[i + 1]) <= now then redis.call('HDEL', KEYS[2], fields[i]) end
  end
  if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then
    if redis.call('PTTL', KEYS[1]) < ms then
      if not ledger_fits({{KEYS[1], LEDGER_SMALL}}, 4) then return 0 end
      redis.call('SET', KEYS[1], '1', 'PX', ms)
      ledger_count(KEYS[1], LEDGER_SMALL, ledger_now() + math.ceil(ms / 1000))
    end
    return 2
  end
end
if not ledger_fits({{KEYS[2], LEDGER_PAUSES}}, 4) then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ends)
if redis.call('PTTL', KEYS[2]) < ms then redis.call('PEXPIRE', KEYS[2], ms) end
ledger_count(KEYS[2], LEDGER_PAUSES, ledger_now() + math.ceil(redis.call('PTTL', KEYS[2]) / 1000))
return 1
"""
