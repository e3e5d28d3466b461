-- A new job's record and the events of an add (lane._store_jobs' INSERT and its events):
-- shared by the add path (add.lua, every script that adds) and the plain adds
-- (add_plain_jobs.lua), so both store the same fields and emit the same events.
-- @include events

local LANE_OPTIONAL_FIELDS = {'backoff', 'timeout_ms', 'roc', 'rof'}

-- The record of new job `id` (`key`) from `spec`, due at `due`, with its state's fields
-- (the counters attempts_started, attempts_made and stalled_count and the stacktrace are
-- left unset at their start, 0 and '[]': readers default them, lane_job_count and
-- lane_job_trace; four fields fewer took 1.6 us off a one-job add's 28.8 of script time):
-- a flow parent that `holds` waits for its children (it takes its sequence when
-- released), else delayed when due later, else waiting under sequence `seq` (nil: the
-- queue's next one).
local function lane_new_job(spec, key, id, due, now, seq, holds)
  local job = {
    key = key, id = id, name = spec.name, data = spec.data,
    priority = tostring(spec.priority), lifo = spec.lifo and '1' or '0',
    order_offset = tostring(LANE_HALF), created_at = tostring(now),
    available_at = string.format('%d', due), max_attempts = tostring(spec.attempts),
    options = spec.options,
  }
  for _, name in ipairs(LANE_OPTIONAL_FIELDS) do
    local value = spec[name]
    if value ~= nil and value ~= cjson.null then
      job[name] = tostring(value)
    end
  end
  if holds then
    job.state = 'waiting-children'
    job.deps_pending = '0'
  elseif due > now then
    job.state = 'delayed'
  else
    for name, value in pairs(lane_enqueue_fields(job, nil, seq)) do
      if value ~= false then
        job[name] = lane_field_text(value)
      end
    end
  end
  return job
end

-- Writes a new job's record in one HSET: its state's fields included, two commands fewer
-- per job than an HSET and an HDEL after it.
local function lane_write_new(job)
  local fields = {}
  for name, value in pairs(job) do
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  redis.call('HSET', lane_job_key(job.id), unpack(fields))
end

-- The events of the jobs an add stored (`added`, in input order), as lane._store_jobs
-- writes them: every `added`, then every `waiting`, then every `delayed`, then every
-- `waiting-children` (a flow's parents). `first_id`: the
-- first of the event ids the caller reserved for them (nil: each takes the next).
local function lane_added_events(added, now, first_id)
  local n = first_id
  local function emit(event, job, data)
    lane_emit(event, job.id, data, now, n)
    if n ~= nil then
      n = n + 1
    end
  end
  for _, job in ipairs(added) do
    emit('added', job, {name = job.name})
  end
  for _, job in ipairs(added) do
    if job.state == 'waiting' then
      emit('waiting', job, nil)
    end
  end
  for _, job in ipairs(added) do
    if job.state == 'delayed' then
      emit('delayed', job, {delay = tonumber(job.available_at)})
    end
  end
  for _, job in ipairs(added) do
    if job.state == 'waiting-children' then
      emit('waiting-children', job, nil)
    end
  end
end

-- An add's answer for a job it stored from spec `index` (add_jobs.lua): what the script
-- assigned; the client has the rest.
local function lane_added_answer(index, job)
  return {index, job.id, job.state, job.order_offset, job.seq or false, job.available_at}
end
