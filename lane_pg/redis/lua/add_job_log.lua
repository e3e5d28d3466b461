-- lane.add_job_log (MGMT-13): appends `<ms>:<message>` to the job's log list
-- `<tag>:logs:<id>` (the time it was written, epoch ms, then the message as sent) and keeps
-- only the newest `keep` when given; with a token, only on the job active under it
-- (lane_writable). No event (EVS-5). `bad_keep`: the client found `keep` invalid, which is
-- told only after the job's checks, in lane.add_job_log's order. Returns [status, count]:
-- 'ok' with the entries kept, 'not_found', 'lock_mismatch' or 'bad_keep'.
-- @include json
-- @include now
-- @include manage

local args = lane_args()
local now = lane_now(args.now)
local job, refused = lane_writable(args.id, args.token)
if job == nil then
  return lane_result({refused})
end
if args.bad_keep then
  return lane_result({'bad_keep'})
end
local logs = lane_key('logs:' .. job.id)
redis.call('RPUSH', logs, string.format('%d', now) .. ':' .. args.message)
local keep = args.keep
if keep ~= nil and keep ~= cjson.null then
  if keep == 0 then
    redis.call('DEL', logs)
  else
    redis.call('LTRIM', logs, -keep, -1)
  end
end
return lane_result({'ok', redis.call('LLEN', logs)})
