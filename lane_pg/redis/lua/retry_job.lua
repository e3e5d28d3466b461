-- lane.retry_job (MGMT-8): a completed or failed job back to waiting with a fresh sequence,
-- its result, reason, stack trace, timestamps and counters reset; event `waiting {prev}`.
-- Its dedup id and series are taken back first (DEDUP-13, REP-15: lane_owners_reclaim,
-- checked whole before it applies); a refusal is answered as {error, message} with nothing
-- written. A unique job (A9) loses its owner token: the client sends the job's options
-- text it read (`options_was`) and that text without the token (`options`), since a script
-- never decodes user JSON; when the stored text is no longer `options_was` the answer is
-- ['stale'] and the client reads again. A flow child is its parent's pending dependency
-- again (FLOW-27, lane_flow_restore); a parent with pending children waits for them in
-- waiting-children. Returns [status, job] as promote_job.lua.
-- @include json
-- @include now
-- @include manage

local args = lane_args()
local now = lane_now(args.now)
local job = lane_job(args.id)
if job == nil then
  return lane_result({'not_found'})
end
if job.state ~= 'completed' and job.state ~= 'failed' then
  return lane_result({'conflict', job.state})
end
local unique_spec = nil
if job.dedup_spec ~= nil then
  local dedup = cjson.decode(job.dedup_spec)
  if dedup.kind == 'unique' then
    if job.options ~= args.options_was then
      return lane_result({'stale'})
    end
    dedup.token = nil
    unique_spec = cjson.encode(dedup)
  end
end
local refusal = lane_owners_reclaim(job, now, false)
if refusal ~= nil then
  return lane_result(refusal)
end
lane_owners_reclaim(job, now, true)
if unique_spec ~= nil then
  lane_job_set(job, {options = args.options, dedup_spec = unique_spec})
end
local prev = job.state
lane_unindex(job)
lane_job_set(job, {failed_reason = false, return_value = false, processed_at = false,
                   finished_at = false, attempts_made = 0, attempts_started = 0,
                   stalled_count = 0, stacktrace = '[]'})
lane_flow_restore(job, now)  -- FLOW-27
if job.deps_pending ~= nil and tonumber(job.deps_pending) > 0 then
  lane_job_set(job, {state = 'waiting-children'})
  lane_index(job)
  lane_emit('waiting-children', job.id, {prev = prev}, now)
  return lane_result({'ok', job})
end
lane_enqueue(job)
lane_emit('waiting', job.id, {prev = prev}, now)
lane_wake()
return lane_result({'ok', job})
