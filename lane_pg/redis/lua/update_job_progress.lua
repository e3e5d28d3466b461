-- lane.update_job_progress (MGMT-11): stores a job's progress (JSON text as sent) and
-- writes `progress {data}`; with a token, only on the job active under it. Returns
-- [status, job] as update_job_data.lua.
-- @include json
-- @include now
-- @include manage

local args = lane_args()
local now = lane_now(args.now)
local job, refused = lane_writable(args.id, args.token)
if job == nil then
  return lane_result({refused})
end
lane_job_set(job, {progress = args.progress})
lane_emit_raw('progress', job.id, '{"data":' .. args.progress .. '}', now)
return lane_result({'ok', job})
