-- The rows lane.v_throughput is built from, for one queue: its retained completed and
-- failed jobs that finished at or after `since` (epoch ms), read from the finish indexes
-- (scored by finish time) as [state, finished_at, processed_at or false, available_at].
-- A script, so both indexes and the jobs are read at one instant. The client groups them
-- by minute and takes the percentiles.
-- @include json
-- @include job

local args = lane_args()
local out = {}
for _, state in ipairs({'completed', 'failed'}) do
  local members = redis.call('ZRANGE', lane_key(state), args.since, '+inf', 'BYSCORE')
  for _, member in ipairs(members) do
    local times = redis.call('HMGET', lane_job_key(string.sub(member, 18)), 'finished_at',
                             'processed_at', 'available_at')
    if times[1] then
      out[#out + 1] = {state, times[1], times[2], times[3]}
    end
  end
end
if #out == 0 then
  return '[]'
end
return lane_result(out)
