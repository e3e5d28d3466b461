-- lane.add_jobs (and add_job, a call of one spec): stores new jobs in input order (ADD-1..11).
-- The client has checked every spec (lane_pg.options) and sends each one's stored fields:
-- {id?, name, data, options, priority, lifo, delay_ms, attempts, backoff?, timeout_ms?,
-- roc?, rof?}, the JSON columns as JSON text. A custom id that exists, or that an earlier
-- spec of this call takes, gives that job untouched: no write, no sequence, only
-- `duplicated` (ADD-3). Events as lane._store_jobs writes them: every `added`, then every
-- `waiting`, then every `delayed`, then the `duplicated` of specs that met a job of this
-- call. Returns each spec's job, in input order.
-- @include json
-- @include now
-- @include events

local args = lane_args()
local now = lane_now(args.now)
lane_ensure_queue(now)

local results = {}
local added = {}      -- jobs this call stores, in input order
local by_custom = {}  -- custom id -> its job, for ids this call stores
local later = {}      -- `duplicated` events of specs meeting a job of this call
local any_waiting = false
local min_due = nil

for i, spec in ipairs(args.specs) do
  local custom = spec.id
  if custom == cjson.null then
    custom = nil
  end
  local stored = nil
  if custom ~= nil then
    stored = by_custom[custom]
    if stored ~= nil then
      later[#later + 1] = stored.id
    else
      stored = lane_job(custom)
      if stored ~= nil then
        lane_emit('duplicated', custom, nil, now)
      end
    end
  end
  if stored == nil then
    local key = redis.call('INCR', lane_key('ids'))
    local id = custom or tostring(key)
    local due = now + spec.delay_ms
    local job = {
      key = tostring(key), id = id, name = spec.name, data = spec.data,
      priority = tostring(spec.priority), lifo = spec.lifo and '1' or '0',
      order_offset = tostring(LANE_HALF), created_at = tostring(now),
      available_at = tostring(due), attempts_started = '0', attempts_made = '0',
      max_attempts = tostring(spec.attempts), stalled_count = '0', stacktrace = '[]',
      options = spec.options,
    }
    for _, name in ipairs({'backoff', 'timeout_ms', 'roc', 'rof'}) do
      if spec[name] ~= nil and spec[name] ~= cjson.null then
        job[name] = tostring(spec[name])
      end
    end
    local fields = {}
    for name, value in pairs(job) do
      fields[#fields + 1] = name
      fields[#fields + 1] = value
    end
    redis.call('HSET', lane_job_key(id), unpack(fields))
    if spec.delay_ms > 0 then
      lane_job_set(job, {state = 'delayed'})
      lane_index(job, due)
      if min_due == nil or due < min_due then
        min_due = due
      end
    else
      lane_enqueue(job)
      any_waiting = true
    end
    added[#added + 1] = job
    if custom ~= nil then
      by_custom[custom] = job
    end
    stored = job
  end
  results[i] = stored
end

for _, job in ipairs(added) do
  lane_emit('added', job.id, {name = job.name}, now)
end
for _, job in ipairs(added) do
  if job.state == 'waiting' then
    lane_emit('waiting', job.id, nil, now)
  end
end
for _, job in ipairs(added) do
  if job.state == 'delayed' then
    lane_emit('delayed', job.id, {delay = tonumber(job.available_at)}, now)
  end
end
for _, id in ipairs(later) do
  lane_emit('duplicated', id, nil, now)
end

if any_waiting then
  lane_wake()
elseif min_due ~= nil then
  lane_wake_at(min_due)
end
return lane_result(results)
