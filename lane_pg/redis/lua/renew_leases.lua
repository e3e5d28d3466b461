-- lane.renew_leases for one queue's leases: extends each lease still held under its token
-- to now + lease_ms; returns the positions (1-based) of those that were not (CLAIM-5/6).
-- @include json
-- @include now
-- @include finish

local args = lane_args()
local now = lane_now(args.now)
local lost = {}
for i, ref in ipairs(args.leases) do
  local job = lane_owned(ref[1], ref[2])
  if job == nil then
    lost[#lost + 1] = i
  else
    lane_job_set(job, {lease_expires_at = now + args.lease_ms})
    lane_index(job, now + args.lease_ms)
  end
end
if #lost == 0 then
  return '[]'
end
return lane_result(lost)
