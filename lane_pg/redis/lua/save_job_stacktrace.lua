-- lane.save_job_stacktrace (MGMT-12): replaces a job's stack trace list (JSON text the
-- client checked) and failure reason (null clears it) together, in any state; no event.
-- Returns [status, job]: 'ok' or 'not_found'.
-- @include json
-- @include manage

local args = lane_args()
local job = lane_job(args.id)
if job == nil then
  return lane_result({'not_found'})
end
local reason = args.reason
if reason == cjson.null then
  reason = false
end
lane_job_set(job, {stacktrace = args.stacktrace, failed_reason = reason})
return lane_result({'ok', job})
