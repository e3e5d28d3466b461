-- lane.clear_job_logs (MGMT-15): deletes a job's log, or all but its newest `keep` entries
-- (the client has checked keep). No event. Returns [status]: 'ok' or 'not_found'.
-- @include json
-- @include job

local args = lane_args()
if redis.call('EXISTS', lane_job_key(args.id)) == 0 then
  return lane_result({'not_found'})
end
local logs = lane_key('logs:' .. args.id)
if args.keep == 0 then
  redis.call('DEL', logs)
else
  redis.call('LTRIM', logs, -args.keep, -1)
end
return lane_result({'ok'})
