-- lane.remove_orphaned (MGMT-22) for one queue, one part per call (`part`):
-- * 'logs': deletes the lines of the log lists among `ids` whose job is gone, oldest first,
--   at most `limit` lines (as SQL counts rows of lane.job_logs). Redis deletes a job's logs
--   with the job, so these are rare (a job hash deleted by hand).
-- * 'owners': the dedup owner rows without a running TTL whose job is gone, by id, at most
--   `limit`. An owner without a TTL is released with its job, so only the members of
--   `dedup-expiry` whose expiry is past can be such rows (a TTL owner after retention,
--   DEDUP-5, an expired reservation); a kept next job goes with its row (no flow parent
--   waits for one on Redis).
-- * 'series': the repeat series whose owner occurrence is gone, by key, at most `limit`.
-- Flow dependencies are not held on Redis yet. Returns how many went.
-- @include json
-- @include now
-- @include owners

local args = lane_args()
local removed = 0
if args.part == 'owners' then
  local now = lane_now(args.now)
  local due = redis.call('ZRANGE', lane_key('dedup-expiry'), '-inf', string.format('%d', now),
                         'BYSCORE')
  table.sort(due)
  for _, dedup_id in ipairs(due) do
    if removed >= args.limit then
      break
    end
    local owner = lane_owner(dedup_id)
    local job = owner ~= nil and owner.job_id ~= nil and lane_job(owner.job_id) or nil
    if owner ~= nil and (job == nil or job.key ~= owner.job_key) then
      lane_owner_delete(dedup_id, now)
      removed = removed + 1
    end
  end
  return lane_result(removed)
end
if args.part == 'series' then
  local keys = redis.call('SMEMBERS', lane_key('repeats'))
  table.sort(keys)
  for _, series_key in ipairs(keys) do
    if removed >= args.limit then
      break
    end
    local row = lane_series(series_key)
    local job = row ~= nil and row.job_id ~= nil and lane_job(row.job_id) or nil
    if job == nil or job.key ~= row.job_key then
      lane_series_delete(series_key)
      removed = removed + 1
    end
  end
  return lane_result(removed)
end
for _, id in ipairs(args.ids) do
  local left = args.limit - removed
  if left <= 0 then
    break
  end
  if redis.call('EXISTS', lane_job_key(id)) == 0 then
    local logs = lane_key('logs:' .. id)
    local lines = redis.call('LLEN', logs)
    if lines <= left then
      redis.call('DEL', logs)
      removed = removed + lines
    else
      redis.call('LTRIM', logs, left, -1)
      removed = removed + left
    end
  end
end
return lane_result(removed)
