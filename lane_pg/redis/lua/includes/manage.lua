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

-- lane._forget_missing_job (MGMT-16) for the job `id`, which does not exist: the dedup
-- owners and repeat series still naming it. An owner without a TTL is released with its
-- job (finish, removal), so only a TTL owner (DEDUP-5: it outlives the job retention
-- deleted) can be left: those are the members of `dedup-expiry`. Its kept next job goes
-- with its row. Logs go with their job here.
local function lane_forget_missing_job(id, now)
  for _, dedup_id in ipairs(redis.call('ZRANGE', lane_key('dedup-expiry'), 0, -1)) do
    if redis.call('HGET', lane_owner_key(dedup_id), 'job_id') == id then
      lane_owner_delete(dedup_id, now)
    end
  end
  for _, series_key in ipairs(redis.call('SORT', lane_key('repeats'), 'ALPHA')) do
    if redis.call('HGET', lane_series_key(series_key), 'job_id') == id then
      lane_series_delete(series_key)
    end
  end
end
