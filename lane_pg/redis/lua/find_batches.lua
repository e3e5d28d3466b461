-- lane.find_batch (sql/functions/19_batches.sql) for the batches `ids` of one home queue
-- (KEYS[1]), read in one script so each batch's record and counts agree. Returns, per id,
-- false (no such batch) or {fields of the record, settled = n, failed_ids = [job ids in
-- settled_at, queue, id order]}.
-- @include json
-- @include batches

local args = lane_args()
local out = {}
for i, id in ipairs(args.ids) do
  local batch = lane_batch(id)
  if batch == nil then
    out[i] = false
  else
    batch.callbacks = nil
    batch.settled = redis.call('HLEN', lane_batch_key(id, 'settled'))
    local failed = {}
    for j, member in ipairs(redis.call('ZRANGE', lane_batch_key(id, 'failed'), 0, -1)) do
      failed[j] = string.sub(member, string.find(member, ' ', 1, true) + 1)
    end
    batch.failed_ids = failed
    out[i] = batch
  end
end
return lane_result(out)
