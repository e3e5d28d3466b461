-- lane.record_action: `action {action, actor, ...}` in the queue's stream; the event's id,
-- or nil for a queue that does not exist (nothing is created) or records no events.
-- @include json
-- @include now
-- @include events

local args = lane_args()
if redis.call('EXISTS', KEYS[1]) == 0 then
  return lane_result(cjson.null)
end
local job_id = args.job_id
if job_id == cjson.null then
  job_id = nil
end
local id = lane_emit_raw('action', job_id, args.data, lane_now(nil))
return lane_result(id or cjson.null)
