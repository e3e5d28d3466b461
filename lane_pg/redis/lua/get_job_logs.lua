-- lane.get_job_logs (MGMT-14): a window of a job's log in one snapshot: inclusive indices,
-- negative ones counted from the end, over the entries oldest first, or newest first when
-- not `asc`. A missing job has an empty log. Writes nothing. Returns [count, entries]
-- (each `<ms>:<message>`, add_job_log.lua).
-- @include json
-- @include job

local args = lane_args()
if redis.call('EXISTS', lane_job_key(args.id)) == 0 then
  return lane_result({0, {}})
end
local logs = lane_key('logs:' .. args.id)
local count = redis.call('LLEN', logs)
local first = args.start
if first < 0 then
  first = math.max(count + first, 0)
end
local last = args.stop
if last < 0 then
  last = count + last
else
  last = math.min(last, count - 1)
end
if first > last then
  return lane_result({count, {}})
end
if args.asc then
  return lane_result({count, redis.call('LRANGE', logs, first, last)})
end
-- Newest first: the window's mirror image in the stored order, read back reversed.
local stored = redis.call('LRANGE', logs, count - 1 - last, count - 1 - first)
local entries = {}
for i = #stored, 1, -1 do
  entries[#entries + 1] = stored[i]
end
return lane_result({count, entries})
