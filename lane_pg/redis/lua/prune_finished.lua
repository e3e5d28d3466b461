-- lane.prune_finished for one queue: the completed and failed jobs beyond the queue's
-- bound (meta `keep_completed` / `keep_failed`: absent = the client's default, the
-- client's `keep_all` text = keep all) go with their logs and a parent's dependency rows
-- (lane._flow_forget), oldest first ((finished_at, key): the finish indexes'
-- order), at most `batch` per state. No events, as BullMQ's retention writes none.
-- Returns how many jobs went.
-- @include json
-- @include job

local args = lane_args()
if redis.call('EXISTS', KEYS[1]) == 0 then
  return lane_result(0)
end
local deleted = 0
for _, state in ipairs({'completed', 'failed'}) do
  local keep = lane_meta('keep_' .. state, nil)
  if keep == nil then
    keep = args.defaults[state]
  end
  if keep ~= args.keep_all then
    keep = tonumber(keep)
    local index = lane_key(state)
    local excess = redis.call('ZCARD', index) - keep
    if excess > 0 then
      local members = redis.call('ZRANGE', index, 0, math.min(excess, args.batch) - 1)
      for _, member in ipairs(members) do
        local id = string.sub(member, 18)
        redis.call('DEL', lane_job_key(id), lane_key('logs:' .. id))
        redis.call('DEL', lane_deps_keys(string.format('%d', tonumber(string.sub(member, 1, 16)))))
      end
      redis.call('ZREMRANGEBYRANK', index, 0, #members - 1)
      deleted = deleted + #members
    end
  end
end
return lane_result(deleted)
