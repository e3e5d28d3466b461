-- lane.promote_job (MGMT-3): a delayed job to waiting now, with a fresh sequence (ORD-2),
-- event `waiting {prev: delayed}`, idle claimers woken. Returns [status, job]: 'ok', or
-- 'not_found', or 'conflict' with the job's state.
-- @include json
-- @include now
-- @include manage

local args = lane_args()
local now = lane_now(args.now)
local job = lane_job(args.id)
if job == nil then
  return lane_result({'not_found'})
end
if job.state ~= 'delayed' then
  return lane_result({'conflict', job.state})
end
lane_unindex(job)
lane_enqueue(job)
lane_emit('waiting', job.id, {prev = 'delayed'}, now)
lane_wake()
return lane_result({'ok', job})
