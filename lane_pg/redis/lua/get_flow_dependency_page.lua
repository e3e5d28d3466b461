-- lane.get_flow_dependency_page (FLOW-20, sql/functions/18_flows_inspect.sql): up to
-- `count` dependencies of bucket `kind` after `cursor` in attach order, one range read of
-- the bucket's sorted set (the same cost at any cursor). Returns {[[queue, id, value?,
-- reason?], ...], next cursor (0: done)}.
-- @include json
-- @include flows

local args = lane_args()
local parent = lane_job(args.id)
if parent == nil then
  return lane_result({{}, 0})
end
local base = 'deps:' .. parent.key
local raw = redis.call('ZRANGE', lane_key(base .. ':' .. args.kind),
                       string.format('(%d', args.cursor), '+inf', 'BYSCORE', 'LIMIT', 0,
                       args.count + 1, 'WITHSCORES')
local items = {}
local last = 0
for i = 1, math.min(#raw / 2, args.count) do
  local ref = raw[2 * i - 1]
  last = tonumber(raw[2 * i])
  local queue = string.match(ref, '^([^\n]*)\n')
  items[i] = {queue, string.sub(ref, #queue + 2),
              redis.call('HGET', lane_key(base .. ':values'), ref),
              redis.call('HGET', lane_key(base .. ':reasons'), ref)}
end
if #items == 0 then
  return lane_result({{}, 0})
end
return lane_result({items, (#raw / 2 > args.count) and last or 0})
