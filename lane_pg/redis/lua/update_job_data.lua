-- lane.update_job_data (MGMT-10): replaces a job's payload (JSON text as sent); with a
-- token, only on the job active under it (lane_writable). No event. Returns [status, job]:
-- 'ok', 'not_found' or 'lock_mismatch'.
-- @include json
-- @include manage

local args = lane_args()
local job, refused = lane_writable(args.id, args.token)
if job == nil then
  return lane_result({refused})
end
lane_job_set(job, {data = args.data})
return lane_result({'ok', job})
