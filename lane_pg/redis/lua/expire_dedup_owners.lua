-- lane.expire_dedup_owners for one queue: deletes up to `args.limit` owner rows whose TTL
-- ran out by `args.now`, oldest expiry first; a keep-last owner that runs keeps its row
-- (its TTL does not count while it runs). Returns how many went.
-- @include json
-- @include owners

local args = lane_args()
local now = tonumber(args.now)
local gone = 0
local index = lane_key('dedup-expiry')
local offset = 0
while gone < args.limit do
  local ids = redis.call('ZRANGE', index, '-inf', now, 'BYSCORE', 'LIMIT', offset, 100)
  if #ids == 0 then
    break
  end
  for _, dedup_id in ipairs(ids) do
    if gone >= args.limit then
      break
    end
    local owner = lane_owner(dedup_id)
    local runs = false
    if owner ~= nil and owner.keep_last == '1' and owner.job_id ~= nil then
      local job = lane_job(owner.job_id)
      runs = job ~= nil and job.key == owner.job_key and job.state == 'active'
    end
    if runs then
      offset = offset + 1
    else
      lane_owner_delete(dedup_id, now)
      gone = gone + 1
    end
  end
end
return lane_result(gone)
