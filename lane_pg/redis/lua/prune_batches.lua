-- lane.prune_batches (sql/functions/19_batches.sql) for the batches `ids` of one home queue
-- (KEYS[1]): each that finished before `finished_cut`, or (with `unfinished_cut`) was
-- created before it and never finished, goes with its settlements; its jobs stay and
-- settle nothing. Returns {pruned ids, ids with no record (the client's directory entry
-- outlived it)}.
-- @include json
-- @include batches

local args = lane_args()
local pruned, missing = {}, {}
for _, id in ipairs(args.ids) do
  local batch = lane_batch(id)
  if batch == nil then
    missing[#missing + 1] = id
  elseif (batch.finished_at ~= nil and tonumber(batch.finished_at) < args.finished_cut)
      or (args.unfinished_cut ~= cjson.null and args.unfinished_cut ~= nil
          and batch.finished_at == nil and tonumber(batch.created_at) < args.unfinished_cut) then
    redis.call('DEL', lane_batch_key(id), lane_batch_key(id, 'settled'),
               lane_batch_key(id, 'failed'), lane_batch_key(id, 'reasons'),
               lane_batch_key(id, 'jobs'))
    pruned[#pruned + 1] = id
  end
end
return lane_result({pruned, missing})
