-- Managing single jobs (MGMT): the lookups and refusals the management scripts share.
-- Each returns its refusal as the script's result ({status, ...}) rather than raising, so
-- the client raises the contract's error (lane_pg.redis.jobs) and nothing was written.
-- @include finish

-- The job a write may change (lane._writable_job_key): with `token` nil an
-- administrator's write (any job), else a run's (active under exactly that token).
local function lane_writable(id, token)
  if token == nil or token == cjson.null then
    local job = lane_job(id)
    if job == nil then
      return nil, 'not_found'
    end
    return job, nil
  end
  return lane_owned(id, token)
end

-- The parts of the job model the Redis backend does not hold yet (deduplication, repeat
-- series, flows, batches) refuse the management operations that would have to update
-- them, rather than doing half the work; no such job can be added on Redis yet.
local function lane_manage_plain(job)
  if job.dedup_id or job.repeat_key or job.parent_id or job.batch_id or job.deps_pending then
    error('lane_pg: this job uses a feature the Redis backend does not support yet')
  end
end
