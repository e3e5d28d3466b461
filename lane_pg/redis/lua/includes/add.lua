-- Storing new jobs (lane._store_jobs): the add path every script that adds goes through
-- (add_jobs, a kept next job, a series' next occurrence, upsert_repeat, a debounced
-- dispatch), with the deduplication (lane._dedup_take) and series (lane._repeat_take)
-- claims, and what a finish does to its job's owners (lane._dedup_finish,
-- lane._repeat_finish, lane._repeat_release).
--
-- A spec is what the client checked and sends (lane_pg.redis.rows.spec_fields plus
-- lane_pg.redis.dedup.owner_fields): {id?, name, data, options, priority, lifo, delay_ms,
-- attempts, backoff?, timeout_ms?, roc?, rof?, dedup?, series?}, the JSON columns as JSON
-- text; dedup = {id, ttl_ms?, extend_ttl, replace_delayed, keep_last, token?, kind};
-- series = {key, every_ms? | pattern?, tz?, limit?, end_at? (text: past 2^53 / 1000 cjson
-- would print it rounded)}.
-- @include owners
-- @include store

-- Whether an add of `dedup` replaces its holder (DEDUP-7) rather than giving it back.
local function lane_dedup_replaces(dedup, holder)
  return dedup.kind ~= 'unique' and dedup.replace_delayed and lane_replaceable(holder)
end

-- Whether adding `spec` (no custom id, or one no job has) gives back the job holding its
-- deduplication id, as lane_dedup_take would decide; reads only.
local function lane_dedup_gives_holder(spec, now)
  local dedup = lane_given(spec.dedup)
  local owner = dedup and lane_owner(dedup.id)
  if owner == nil or lane_owner_reserved(owner, now) then
    return false
  end
  local holder = lane_owner_job(dedup.id, owner, now)
  return holder ~= nil and not lane_dedup_replaces(dedup, holder)
end

-- lane._dedup_take for the new job (`key`, `id`) of `spec`: nil when the new job owns the
-- id now, else the job that keeps it. `in_call` (id -> key) names the jobs this call
-- stored, whose events wait: the pair for a duplicate of one waits too (`later`).
local function lane_dedup_take(dedup, spec, key, id, now, in_call, later, node)
  local dedup_id = dedup.id
  local token = lane_given(dedup.token)
  local ttl = lane_given(dedup.ttl_ms)
  local expires = false
  if ttl ~= nil then
    expires = now + ttl
  end
  local unique = dedup.kind == 'unique'
  local fresh = {kind = unique and 'unique' or 'dedup', job_id = id, job_key = key,
                 expires_at = expires, keep_last = (not unique and dedup.keep_last) and '1',
                 token = token or false, created_at = now}
  local owner = lane_owner(dedup_id)
  if owner ~= nil and lane_owner_reserved(owner, now) then
    -- A live reservation (TX-10): the add carrying its token takes it over with its
    -- expiry; any other add is refused (lane_add_check does so before any write).
    if owner.token ~= token then
      error('lane_pg: deduplication id ' .. dedup_id .. ' is reserved by a pending push')
    end
    if unique then
      fresh.expires_at = owner.expires_at
      lane_owner_write(dedup_id, fresh)
    else
      owner.job_id, owner.job_key, owner.kind = id, key, 'dedup'
      lane_owner_write(dedup_id, owner)
    end
    return nil
  end
  local holder = nil
  if owner ~= nil then
    holder = lane_owner_job(dedup_id, owner, now)
  end
  if holder == nil then  -- none, or a row that no longer blocks (DEDUP-15, A10)
    if owner ~= nil then
      lane_dedup_next_dropped(dedup_id, owner, now)
    end
    lane_owner_write(dedup_id, fresh)
    return nil
  end
  if in_call[holder.id] == holder.key then  -- DEDUP-20: after the owner's own events
    later[#later + 1] = {'debounced', holder.id, lane_dedup_event_data(dedup_id, id)}
    later[#later + 1] = {'deduplicated', holder.id, lane_dedup_event_data(dedup_id, id)}
    return holder
  end
  if lane_dedup_replaces(dedup, holder) then
    -- The row names the new job first, so the removal leaves it to the new owner.
    if dedup.extend_ttl then
      fresh.expires_at = expires
    else
      fresh.expires_at = owner.expires_at or false
    end
    -- The row is updated, not written anew: a debounce burst it holds goes on (UNIQ-10).
    fresh.created_at = owner.created_at or now
    lane_owner_write(dedup_id, fresh)
    lane_remove_standalone(holder, now)
    lane_dedup_next_dropped(dedup_id, owner, now)
    lane_dedup_events(id, dedup_id, holder.id, now)
    return nil
  end
  if not unique and dedup.keep_last and holder.state == 'active' then
    lane_flow_keep_next(dedup_id, owner, node, now)  -- DEDUP-18, -19
    owner.next = cjson.encode(spec)  -- only the latest is kept (DEDUP-9)
    owner.keep_last = '1'
    owner.expires_at = nil
    lane_owner_write(dedup_id, owner)
  elseif dedup.extend_ttl then
    owner.expires_at = expires
    lane_owner_write(dedup_id, owner)
  end
  lane_dedup_events(holder.id, dedup_id, id, now)
  return holder
end

-- A series row made whole (REP-13) for `spec`, owned by the job (`id`, `key`) due at
-- `next_at`, its first occurrence.
local function lane_series_create(spec, id, key, next_at, now)
  local series = spec.series
  local fields = {'job_id', id, 'job_key', key, 'name', spec.name, 'count', '1',
                  'start_at', string.format('%d', now), 'next_at', string.format('%d', next_at),
                  'options', spec.options, 'template', cjson.encode(spec)}
  for _, name in ipairs({'every_ms', 'pattern', 'tz', 'limit', 'end_at'}) do
    local value = lane_given(series[name])
    if value ~= nil then
      if type(value) == 'number' then
        value = string.format('%d', value)
      end
      fields[#fields + 1] = name
      fields[#fields + 1] = value
    end
  end
  redis.call('DEL', lane_series_key(series.key))
  redis.call('HSET', lane_series_key(series.key), unpack(fields))
  redis.call('SADD', lane_key('repeats'), series.key)
end

-- A cron match the script was not given: a caller that skipped its check (lane_add_check,
-- lane_finish_ticks), never a reason to store a wrong time or none.
local function lane_check_ticks(missing, series_key)
  if missing then
    error('lane_pg: the cron match of series ' .. series_key .. ' was not computed: check'
          .. ' with lane_finish_ticks or lane_add_check before writing')
  end
end

-- lane._repeat_take: the series' live owner (`duplicated` on it), or the tick the new job
-- is due at as the series' next occurrence; neither when the series has no occurrence
-- left (a client add checks that first: lane_add_check).
local function lane_repeat_take(series, spec, key, id, now)
  local row = lane_series(series.key)
  if row ~= nil then
    local owner = lane_series_owner(series.key, row)
    if owner ~= nil then
      lane_emit('duplicated', owner.id, nil, now)
      return nil, owner
    end
    if lane_series_completed(series.key, row) ~= nil then
      local following, missing = lane_repeat_next(row, tonumber(row.next_at), now)
      lane_check_ticks(missing, series.key)
      if following == nil then
        return nil, nil
      end
      redis.call('HSET', lane_series_key(series.key), 'job_id', id, 'job_key', key,
                 'count', string.format('%d', tonumber(row.count) + 1),
                 'next_at', string.format('%d', following))
      return following, nil
    end
  end
  local first, missing = lane_repeat_next(series, nil, now)
  lane_check_ticks(missing, series.key)
  if first == nil then
    return nil, nil
  end
  lane_series_create(spec, id, key, first, now)
  return first, nil
end

-- Stores new jobs in input order (ADD-1..13, DEDUP-1..20, REP-1..6): each spec's job, or
-- the job that keeps its custom id, dedup id or series (false when a series the spec
-- would continue has no occurrence left). Events as lane._store_jobs writes them: every
-- `added`, then every `waiting`, then every `delayed`, then every `waiting-children`
-- (store.lua), then those of specs that met a job of this call; a spec meeting a stored
-- job writes its events at once. `flow` (flows.lua, flows_add.lua) says the specs are flow nodes of the
-- current queue (`queue`): the parent they are children of, if any (`parent_queue`,
-- `parent_id`, `ptag`, `parent_key`), and per spec whether it waits for children of its
-- own (`holds`), its policy and its child nodes (`policies`, `children`: what a kept next
-- job keeps). The second result tells, per spec, whether its job is new; the third maps
-- each job this call stored to the index of its spec.
local function lane_add_specs(specs, now, flow)
  local results = {}
  local fresh = {}
  local added = {}      -- jobs this call stores, in input order
  local by_custom = {}  -- custom id -> its job, for ids this call stores
  local in_call = {}    -- id -> key of the jobs this call stores
  local started = {}    -- series key -> its job, for series this call starts or continues
  local later = {}      -- events of specs meeting a job of this call: {event, id, data}
  local origin = {}     -- job -> index of its spec, for the jobs this call stores
  local any_waiting = false
  local min_due = nil

  for i, spec in ipairs(specs) do
    local custom = lane_given(spec.id)
    local stored = nil
    local skipped = false
    if custom ~= nil then
      stored = by_custom[custom]
      if stored ~= nil then
        later[#later + 1] = {'duplicated', stored.id}
      else
        stored = lane_job(custom)
        if stored ~= nil then
          lane_emit('duplicated', custom, nil, now)
        end
      end
    end
    if stored == nil then
      local key = tostring(redis.call('INCR', lane_key('ids')))
      local id = custom or key
      local dedup = lane_given(spec.dedup)
      local series = lane_given(spec.series)
      local due = now + spec.delay_ms
      if dedup ~= nil then
        stored = lane_dedup_take(dedup, spec, key, id, now, in_call, later,
                                 lane_flow_node(flow, i))
      end
      if stored == nil and series ~= nil then
        local first = started[series.key]
        if first ~= nil then  -- REP-6 within the call
          later[#later + 1] = {'duplicated', first.id}
          stored = first
        else
          local tick, owner = lane_repeat_take(series, spec, key, id, now)
          if owner ~= nil then
            stored = owner
          elseif tick == nil then
            skipped = true
          else
            due = math.max(tick, now)
          end
        end
      end
      if stored == nil and not skipped then
        local job = lane_new_job(spec, key, id, due, now, nil, flow ~= nil and flow.holds[i])
        if dedup ~= nil then  -- dedup_spec and series_spec: what a retry reclaims from
          job.dedup_id = dedup.id
          job.dedup_spec = cjson.encode(dedup)
        end
        if series ~= nil then
          job.repeat_key = series.key
          job.series_spec = cjson.encode(series)
        end
        if custom ~= nil then
          job.custom_id = '1'
        end
        lane_flow_child(job, flow)
        if job.state == 'delayed' then
          if min_due == nil or due < min_due then
            min_due = due
          end
        elseif job.state == 'waiting' then
          any_waiting = true
        end
        lane_write_new(job)
        lane_index(job, job.state == 'delayed' and due or 0)
        added[#added + 1] = job
        origin[job] = i
        in_call[id] = key
        if custom ~= nil then
          by_custom[custom] = job
        end
        if series ~= nil then
          started[series.key] = job
        end
        stored = job
        fresh[i] = true
      end
    end
    results[i] = stored or false
    fresh[i] = fresh[i] or false
  end

  lane_added_events(added, now)
  for _, event in ipairs(later) do
    lane_emit(event[1], event[2], event[3], now)
  end

  if any_waiting then
    lane_wake()
  elseif min_due ~= nil then
    lane_wake_at(min_due)
  end
  return results, fresh, origin
end

-- Before a client's add writes anything: nil when it may go on, else the answer to return
-- ({error, message} for a refusal, or the cron matches it needs). A spec meeting another
-- push's live reservation refuses the whole call (TX-10; a spec whose custom id is stored
-- never reaches the dedup check, ADD-3); a spec continuing a series with no occurrence
-- left refuses it (ADD-13; the client checked the first occurrences already).
local function lane_add_check(args, specs, now)
  local needs = {}
  for _, spec in ipairs(specs) do
    local dedup = lane_given(spec.dedup)
    local custom = lane_given(spec.id)
    if dedup ~= nil and not (custom ~= nil and lane_job(custom) ~= nil) then
      local owner = lane_owner(dedup.id)
      if owner ~= nil and lane_owner_reserved(owner, now)
         and owner.token ~= lane_given(dedup.token) then
        return {error = 'dedup_conflict', message = 'deduplication id ' .. cjson.encode(dedup.id)
                .. ' is reserved by a pending push until ' .. owner.expires_at}
      end
    end
    local series = lane_given(spec.series)
    if series ~= nil then
      local row = lane_series(series.key)
      if row ~= nil and row.pattern ~= nil and lane_series_owner(series.key, row) == nil
         and lane_series_completed(series.key, row) ~= nil then
        needs[#needs + 1] = {row.pattern, row.tz or cjson.null,
                             math.max(tonumber(row.next_at), now)}
      end
      if lane_given(series.pattern) ~= nil then
        needs[#needs + 1] = {series.pattern, series.tz or cjson.null, now}
      end
    end
  end
  local answer = lane_ticks_answer(args.cron, needs, now)
  if answer ~= nil then
    return answer
  end
  local seen = {}
  for _, spec in ipairs(specs) do
    local series = lane_given(spec.series)
    if series ~= nil and not seen[series.key] then
      seen[series.key] = true
      local row = lane_series(series.key)
      if row ~= nil and lane_series_owner(series.key, row) == nil
         and lane_series_completed(series.key, row) ~= nil
         and lane_repeat_next(row, tonumber(row.next_at), now) == nil then
        return {error = 'invalid', message = 'repeat series ' .. cjson.encode(series.key)
                .. ' has no occurrence left'}
      end
    end
  end
  return nil
end

-- lane._dedup_finish for a job that just completed or failed for good (DEDUP-3, -4, -9,
-- -10): the row goes unless a TTL still runs; a kept next job is stored now.
local function lane_dedup_finish(job, now)
  if job.dedup_id == nil then
    return
  end
  local owner = lane_owner(job.dedup_id)
  if owner == nil or owner.job_key ~= job.key then
    return
  end
  if owner.next ~= nil or owner.keep_last == '1' or owner.expires_at == nil
     or tonumber(owner.expires_at) <= now then
    lane_owner_delete(job.dedup_id)
  end
  if owner.next ~= nil and (owner.next_parent ~= nil or owner.next_children ~= nil) then
    LANE_FLOW.materialise(job.dedup_id, owner, now)  -- DEDUP-18, -19 (flows_add.lua)
  elseif owner.next ~= nil then
    lane_add_specs({cjson.decode(owner.next)}, now)
  end
end

-- lane._repeat_finish for a job that just completed (REP-2..4): the next occurrence
-- through the add path, unless the limit is reached or no tick is left (the row goes).
local function lane_repeat_finish(job, now)
  if job.repeat_key == nil then
    return
  end
  local row = lane_series(job.repeat_key)
  if row == nil or row.job_key ~= job.key then
    return
  end
  local limit = tonumber(row.limit) or LANE_MAX_INT
  if tonumber(row.count) >= limit then
    lane_series_delete(job.repeat_key)
    return
  end
  local following, missing = lane_repeat_next(row, tonumber(row.next_at), now)
  lane_check_ticks(missing, job.repeat_key)
  if following == nil then
    lane_series_delete(job.repeat_key)
    return
  end
  lane_add_specs({cjson.decode(row.template)}, now)
end

-- lane._repeat_release (REP-7): a job failed for good ends its series while it owns it.
local function lane_repeat_release(job)
  if job.repeat_key == nil then
    return
  end
  local row = lane_series(job.repeat_key)
  if row ~= nil and row.job_key == job.key then
    lane_series_delete(job.repeat_key)
  end
end

-- The spec a stored job was added from, as far as a series template needs it (its delay
-- is 0: a repeat document refuses delay_ms).
local function lane_spec_of(job)
  local spec = {name = job.name, data = job.data, options = job.options,
                priority = tonumber(job.priority), lifo = job.lifo == '1', delay_ms = 0,
                attempts = tonumber(job.max_attempts), backoff = job.backoff,
                timeout_ms = tonumber(job.timeout_ms), roc = job.roc, rof = job.rof}
  if job.custom_id == '1' then
    spec.id = job.id
  end
  if job.dedup_spec ~= nil then
    spec.dedup = cjson.decode(job.dedup_spec)
  end
  if job.series_spec ~= nil then
    spec.series = cjson.decode(job.series_spec)
  end
  return spec
end

-- What retry_job does to a retried job's owners, checked for every job of the call with
-- `apply` false before any is applied: nil, or the refusal {error = 'dedup_conflict' |
-- 'repeat_conflict', message} (DeduplicationConflict, RepeatConflict).
-- * DEDUP-13 (lane._dedup_reclaim): the job takes its dedup id back, its TTL counted from
--   `now`; refused while a reservation or another live owner holds it. A unique job
--   neither takes back nor checks its lock (A9; the retry drops its token from the
--   options and from `dedup_spec` itself).
-- * REP-15 (lane._repeat_reclaim): the job owns its series again (the row is made anew
--   when its failure ended it); refused while another unfinished occurrence owns it.
local function lane_owners_reclaim(job, now, apply)
  if job.dedup_spec ~= nil then
    local dedup = cjson.decode(job.dedup_spec)
    if dedup.kind ~= 'unique' then
      local owner = lane_owner(job.dedup_id)
      if owner ~= nil and lane_owner_reserved(owner, now) then
        return {error = 'dedup_conflict', message = 'deduplication id '
                .. cjson.encode(job.dedup_id) .. ' is reserved by a pending push: job '
                .. job.id .. ' cannot be retried until it is released'}
      end
      if owner ~= nil and owner.job_key ~= job.key then
        local holder = lane_owner_job(job.dedup_id, owner, now)
        if holder ~= nil then
          return {error = 'dedup_conflict', message = 'deduplication id '
                  .. cjson.encode(job.dedup_id) .. ' is held by job ' .. holder.id .. ': job '
                  .. job.id .. ' cannot be retried until it is released'}
        end
      end
      if apply then
        if owner ~= nil then
          lane_dedup_next_dropped(job.dedup_id, owner, now)
        end
        local ttl = lane_given(dedup.ttl_ms)
        lane_owner_write(job.dedup_id, {
          kind = 'dedup', job_id = job.id, job_key = job.key,
          expires_at = ttl ~= nil and now + ttl, keep_last = dedup.keep_last and '1',
          token = lane_given(dedup.token) or false, created_at = now})
      end
    end
  end
  if job.repeat_key ~= nil then
    local row = lane_series(job.repeat_key)
    if row ~= nil then
      local owner = lane_series_owner(job.repeat_key, row)
      if owner ~= nil and owner.key ~= job.key then
        return {error = 'repeat_conflict', message = 'repeat series '
                .. cjson.encode(job.repeat_key) .. ' is owned by job ' .. owner.id .. ': job '
                .. job.id .. ' cannot be retried while it runs'}
      end
      if apply then
        redis.call('HSET', lane_series_key(job.repeat_key), 'job_id', job.id, 'job_key', job.key,
                   'next_at', string.format('%d', now))
      end
    elseif apply and job.series_spec ~= nil then
      lane_series_create(lane_spec_of(job), job.id, job.key, now, now)
    end
  end
  return nil
end
