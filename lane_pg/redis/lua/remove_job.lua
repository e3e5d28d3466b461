-- lane.remove_job (MGMT-16): deletes a job and its logs, event `removed {prev}`; an active
-- job whose lease has not expired is refused. A missing job gives 'missing': nothing names
-- it on Redis yet (lane._forget_missing_job's dedup owners and repeat series are not held
-- here), and a job of those features is refused (lane_manage_plain). Returns [status]:
-- 'ok', 'missing', or 'locked' with the lease's expiry.
-- @include json
-- @include now
-- @include manage

local args = lane_args()
local now = lane_now(args.now)
local job = lane_job(args.id)
if job == nil then
  return lane_result({'missing'})
end
if job.state == 'active' and job.lease_expires_at ~= nil
   and tonumber(job.lease_expires_at) >= now then
  return lane_result({'locked', tonumber(job.lease_expires_at)})
end
lane_manage_plain(job)
lane_emit('removed', job.id, {prev = job.state}, now)
lane_delete(job)
return lane_result({'ok'})
