-- Finishing a job (FIN-1..7): the lease checks every fenced write makes, the moves into
-- completed and failed, and what follows each (retention, per-minute metrics, drained), as
-- lane._complete and lane._fail_terminal do them.
-- @include events
-- @include add
-- @include flows_add
-- @include batches
-- @include chains

-- The job `id` if it is active under `token`, else nil and 'not_found' or 'lock_mismatch'
-- (lane._owned_job). The client sends tokens in canonical UUID text (or '' for a text that
-- is no UUID, which matches nothing).
local function lane_owned(id, token)
  local job = lane_job(id)
  if job == nil then
    return nil, 'not_found'
  end
  if job.state ~= 'active' or job.lock_token ~= token or token == '' then
    return nil, 'lock_mismatch'
  end
  return job, nil
end

local function lane_end_lease(job)
  lane_job_set(job, {lock_token = false, lease_expires_at = false})
end

-- RET-2/3: the finished job's retention rule (JSON text: true, or {age_ms?, count?,
-- limit?}) applied to its state's jobs: by age (oldest first, at most `limit`), then all
-- but the newest `count`. Members of a finish index order by (finished_at, key).
local function lane_apply_retention(job, policy_text, now)
  if policy_text == nil then
    return
  end
  local index = lane_key(job.state)
  if policy_text == 'true' then
    lane_delete(job)
    return
  end
  local policy = cjson.decode(policy_text)
  local doomed = {}
  if policy.age_ms ~= nil then
    local cutoff = now - policy.age_ms
    local members
    if policy.limit ~= nil then
      members = redis.call('ZRANGE', index, '-inf', '(' .. cutoff, 'BYSCORE', 'LIMIT', 0,
                           policy.limit)
    else
      members = redis.call('ZRANGE', index, '-inf', '(' .. cutoff, 'BYSCORE')
    end
    for _, member in ipairs(members) do
      doomed[#doomed + 1] = member
    end
    for _, member in ipairs(doomed) do
      redis.call('ZREM', index, member)
    end
  end
  if policy.count ~= nil then
    local total = redis.call('ZCARD', index)
    if total > policy.count then
      local members = redis.call('ZRANGE', index, 0, total - policy.count - 1)
      for _, member in ipairs(members) do
        doomed[#doomed + 1] = member
      end
      redis.call('ZREMRANGEBYRANK', index, 0, total - policy.count - 1)
    end
  end
  for _, member in ipairs(doomed) do
    lane_forget_finished(job.state, member)
  end
end

-- Retention, metrics, then `drained` (FIN-2 steps 5 to 7).
local function lane_after_finish(job, policy_text, now)
  local state = job.state
  lane_apply_retention(job, policy_text, now)
  lane_count_finished(state, 1, now)
  lane_drained_check(now)
end

-- active -> completed (FIN-1); `result` is JSON text.
local function lane_complete(job, result, now)
  lane_unindex(job)
  lane_job_set(job, {lock_token = false, lease_expires_at = false, state = 'completed',
                     finished_at = now, return_value = result})
  lane_index(job, now)
  lane_emit_raw('completed', job.id, '{"prev":"active","returnvalue":' .. result .. '}', now)
  local snapshot = lane_copy(job)
  lane_dedup_finish(job, now)
  lane_repeat_finish(job, now)
  lane_flow_resolve({job}, 'completed', now)
  lane_batch_settle(job, 'completed', now)  -- BATCH-5, CHAIN-1: in this script
  lane_chain_advance(job, now)
  lane_after_finish(job, job.roc, now)
  return snapshot
end

-- The terminal failure of a job (FIN-4, STALL-4): `prev` is the state it leaves.
local function lane_fail_terminal(job, reason, now)
  local prev = job.state
  lane_unindex(job)
  lane_job_set(job, {lock_token = false, lease_expires_at = false, state = 'failed',
                     failed_reason = reason, finished_at = now})
  lane_index(job, now)
  lane_emit('failed', job.id, {prev = prev, failedReason = reason}, now)
  local made = lane_job_count(job, 'attempts_made')
  if made >= tonumber(job.max_attempts) then
    lane_emit('retries-exhausted', job.id, {attemptsMade = made}, now)
  end
  local snapshot = lane_copy(job)
  lane_dedup_finish(job, now)
  lane_repeat_release(job)
  lane_flow_resolve({job}, 'failed', now)
  lane_batch_settle(job, 'failed', now)  -- BATCH-5, before retention
  lane_chain_broken(job, now)
  lane_after_finish(job, job.rof, now)
  return snapshot
end
LANE_FLOW.fail_terminal = lane_fail_terminal

-- Milliseconds to wait after failed attempt `attempt` (lane._backoff_ms, Backoff.delay_for);
-- `uniform` is the client's draw in [0, 1) for the jitter.
local LANE_MAX_DURATION_MS = 9223372036854
local function lane_backoff_ms(backoff_text, attempt, uniform)
  if backoff_text == nil then
    return 0
  end
  local backoff = cjson.decode(backoff_text)
  local n = math.max(attempt, 1)
  if backoff.type == 'fixed' then
    return backoff.delay_ms
  elseif backoff.type == 'sequence' then
    return backoff.delays_ms[math.min(n, #backoff.delays_ms)]
  end
  local raw = backoff.base_ms * math.pow(2, math.min(n - 1, 62))
  if backoff.cap_ms ~= nil and backoff.cap_ms ~= cjson.null then
    raw = math.min(raw, backoff.cap_ms)
  end
  local jitter = backoff.jitter
  if jitter == nil or jitter == cjson.null then
    jitter = 0
  end
  local factor = 1.0 - jitter + 2.0 * jitter * uniform
  return math.min(math.floor(raw * factor), LANE_MAX_DURATION_MS)
end

-- Appends one entry to a JSON list of strings, keeping at most `limit` (the newest).
local function lane_append_trace(list_text, entry, limit)
  local list = {}
  if list_text ~= '[]' then
    list = cjson.decode(list_text)
  end
  list[#list + 1] = entry
  if limit ~= nil and #list > limit then
    local kept = {}
    for i = #list - limit + 1, #list do
      kept[#kept + 1] = list[i]
    end
    list = kept
  end
  if #list == 0 then
    return '[]'
  end
  local parts = {}
  for i, value in ipairs(list) do
    parts[i] = cjson.encode(value)
  end
  return '[' .. table.concat(parts, ',') .. ']'
end

-- A failed attempt (FIN-3..6, RETRY-7): retried after its backoff, or failed for good.
local function lane_fail(job, reason, stacktrace, discard_retry, uniform, limit, now)
  local made = lane_job_count(job, 'attempts_made') + 1
  local trace = job.stacktrace or '[]'  -- unset until the first failure (store.lua)
  if stacktrace ~= nil or limit ~= nil then
    if stacktrace ~= nil then
      trace = lane_append_trace(trace, stacktrace, limit)
    elseif limit ~= nil then
      trace = lane_append_trace(trace, nil, limit)
    end
  end
  lane_job_set(job, {attempts_made = made, failed_reason = reason, stacktrace = trace})
  if discard_retry or made >= tonumber(job.max_attempts) then
    return lane_fail_terminal(job, reason, now)
  end
  lane_unindex(job)
  lane_end_lease(job)
  local delay = lane_backoff_ms(job.backoff, made, uniform)
  if delay > 0 then
    lane_job_set(job, {state = 'delayed', available_at = now + delay})
    lane_index(job, now + delay)
    lane_emit('delayed', job.id, {delay = now + delay, prev = 'active', failedReason = reason},
              now)
    lane_wake_at(now + delay)
  else
    lane_enqueue(job)
    lane_emit('waiting', job.id, {prev = 'active'}, now)
    lane_wake()
  end
  return job
end
