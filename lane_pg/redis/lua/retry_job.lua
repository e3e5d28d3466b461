-- lane.retry_job (MGMT-8): a completed or failed job back to waiting with a fresh sequence,
-- its result, reason, stack trace, timestamps and counters reset; event `waiting {prev}`.
-- Deduplication (DEDUP-13), repeat series (REP-15) and flows (FLOW-27) are not on Redis
-- yet: a job of theirs is refused (lane_manage_plain). Returns [status, job] as
-- promote_job.lua.
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
lane_manage_plain(job)
local prev = job.state
lane_unindex(job)
lane_job_set(job, {failed_reason = false, return_value = false, processed_at = false,
                   finished_at = false, attempts_made = 0, attempts_started = 0,
                   stalled_count = 0, stacktrace = '[]'})
lane_enqueue(job)
lane_emit('waiting', job.id, {prev = prev}, now)
lane_wake()
return lane_result({'ok', job})
