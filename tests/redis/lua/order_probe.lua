-- Test probe of includes/order.lua: adds each entry's member to KEYS[1] and returns the
-- ids in the index's order (and the ids read back from the members).
-- @include json
-- @include order
local args = lane_args()
for _, e in ipairs(args.entries) do
  redis.call('ZADD', KEYS[1], 0, lane_order_member(e.priority, e.mode, e.seq, e.key, e.id))
end
local members = redis.call('ZRANGE', KEYS[1], '-', '+', 'BYLEX')
local ids = {}
for i, member in ipairs(members) do
  ids[i] = lane_member_id(member)
end
return lane_result({ids = ids, first = members[1]})
