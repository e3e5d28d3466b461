-- lane.remove_job (MGMT-16): deletes a job and its logs, event `removed {prev}`; an active
-- job whose lease has not expired is refused; its dedup owner and series are released
-- (lane_remove_standalone). A missing job gives 'missing', after the owner rows and series
-- left naming it are dropped (lane_forget_missing_job); a pending flow child is told to its
-- parent (FLOW-26); a batch's job settles as deleted (BATCH-9). Returns [status]:
-- 'ok', 'missing', or 'locked' with the lease's expiry.
-- @include json
-- @include now
-- @include manage

local args = lane_args()
local now = lane_now(args.now)
local job = lane_job(args.id)
if job == nil then
  lane_forget_missing_job(args.id, now)
  return lane_result({'missing'})
end
if job.state == 'active' and job.lease_expires_at ~= nil
   and tonumber(job.lease_expires_at) >= now then
  return lane_result({'locked', tonumber(job.lease_expires_at)})
end
lane_remove_standalone(job, now)
lane_batch_removed(job, now)  -- BATCH-9
return lane_result({'ok'})
