-- Another queue's keys inside one script: a batch's settlement writes its record and its
-- callback jobs in the batch's home queue, a chain's completion adds the next link in that
-- link's queue. The key builders of job.lua read LANE_TAG, so the work runs with LANE_TAG
-- (and the cached `record_events` of events.lua) switched to the other queue's tag, then
-- switched back. A standalone server lets a script reach every key; on Redis Cluster the
-- client refuses at add a batch or chain whose queues lie in more than one slot
-- (lane_pg.redis.batches.check_slots), so a switch never leaves KEYS[1]'s slot there.
-- @include events

local function lane_in_tag(tag, fn, a, b, c, d)
  if tag == LANE_TAG then
    return fn(a, b, c, d)
  end
  local tag_was, events_was = LANE_TAG, lane_events_on
  LANE_TAG, lane_events_on = tag, nil
  local result = fn(a, b, c, d)
  LANE_TAG, lane_events_on = tag_was, events_was
  return result
end
