-- lane.trim_events for one queue (EVS-3): its event stream trimmed exactly to the queue's
-- `events_max` (meta field, default LANE_EVENTS_MAX) entries, the newest kept (XADD's
-- MAXLEN ~ leaves a little more between passes); a one-job add's entry holds two events
-- (lane_emit_added_waiting). Returns how many entries went.
-- @include json
-- @include events

if redis.call('EXISTS', KEYS[1]) == 0 then
  return lane_result(0)
end
local keep = tonumber(lane_meta('events_max', LANE_EVENTS_MAX))
return lane_result(redis.call('XTRIM', lane_key('events'), 'MAXLEN', keep))
